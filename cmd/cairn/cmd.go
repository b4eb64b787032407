package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/cairn-io/cairn/cmd/cairn/server"
	"github.com/cairn-io/cairn/cmd/cairn/server/natsauth"
	"github.com/cairn-io/cairn/commands/admission"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/schemas"
	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
)

// defaultNATS is the NATS URL of every client command: $CAIRN_NATS, else the embedded
// server's default address.
var defaultNATS = func() string {
	if u := os.Getenv("CAIRN_NATS"); u != "" {
		return u
	}
	return "nats://127.0.0.1:4222"
}()

// connect opens a NATS connection. creds is a Cairn credentials file (cairn serve
// --auth, cairn auth node-creds) or a standard NATS .creds file; extra options follow.
func connect(url, creds, name string, extra ...nats.Option) (*nats.Conn, error) {
	opts := append([]nats.Option{nats.Name(name), nats.MaxReconnects(-1)}, server.Liveness()...)
	if creds != "" {
		co, err := natsauth.ConnectOptions(creds)
		if err != nil {
			return nil, fmt.Errorf("--creds: %w", err)
		}
		opts = append(opts, co...)
	}
	opts = append(opts, extra...)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", url, err)
	}
	return nc, nil
}

func defaultActor() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return "cli:" + name + "@" + host
}

// sendCommand sends one command over NATS as actor (with commandID, when set) and
// returns admission's reply; an error means no reply.
func sendCommand(natsURL, creds, verb string, body []byte, commandID, actor string, timeout time.Duration) (admission.Reply, error) {
	// A permission violation (e.g. a node's credentials, which may send no command)
	// arrives asynchronously: it ends the wait at once instead of after the timeout.
	ctx, cancel := context.WithTimeoutCause(context.Background(), timeout, errors.New("no answer in time"))
	defer cancel()
	denied := make(chan error, 1)
	nc, err := connect(natsURL, creds, "cairn-cmd", nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) {
			select {
			case denied <- err:
			default:
			}
			cancel()
		}
	}))
	if err != nil {
		return admission.Reply{}, err
	}
	defer nc.Close()
	m := nats.NewMsg(events.NewNames(prefix).Command(verb))
	m.Data = body
	if commandID != "" {
		m.Header.Set(admission.HeaderCommandID, commandID)
	}
	m.Header.Set(admission.HeaderActor, actor)
	resp, err := nc.RequestMsgWithContext(ctx, m)
	if err != nil {
		select {
		case perr := <-denied:
			return admission.Reply{}, fmt.Errorf("%s refused these credentials: %w", m.Subject, perr)
		default:
		}
		return admission.Reply{}, fmt.Errorf("no answer on %s: %w", m.Subject, err)
	}
	var reply admission.Reply
	if err := json.Unmarshal(resp.Data, &reply); err != nil {
		return admission.Reply{}, fmt.Errorf("unreadable reply: %s", resp.Data)
	}
	return reply, nil
}

// printReply prints a command's reply as indented JSON; a refusal exits 1.
func printReply(reply admission.Reply) error {
	out, _ := json.MarshalIndent(reply, "", "  ")
	fmt.Println(string(out))
	if !reply.OK {
		return exitError{1}
	}
	return nil
}

func cmdCmd() *cobra.Command {
	var (
		natsURL, creds, commandID, actor string
		timeout                          time.Duration
	)
	c := &cobra.Command{
		Use:   "cmd VERB [JSON | @FILE | -]",
		Short: "Send a command and print the reply (exit 0 accepted, 1 refused)",
		Long: `Send a command to admission on <prefix>.cmd.VERB and print the JSON reply.
The body is the JSON argument, @FILE to read it from a file, or - for stdin; none means {}.
Exit status: 0 accepted, 1 refused (the reply says why), 2 no answer.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			body := []byte("{}")
			if len(args) == 2 {
				var err error
				switch a := args[1]; {
				case a == "-":
					body, err = io.ReadAll(os.Stdin)
				case strings.HasPrefix(a, "@"):
					body, err = os.ReadFile(a[1:])
				default:
					body = []byte(a)
				}
				if err != nil {
					return err
				}
			}
			reply, err := sendCommand(natsURL, creds, args[0], body, commandID, actor, timeout)
			if err != nil {
				return err
			}
			return printReply(reply)
		},
	}
	// `cairn cmd VERB --help` shows the verb's fields from its schema; `cairn cmd --help`
	// lists the verbs.
	defaultHelp := c.HelpFunc()
	c.SetHelpFunc(func(cc *cobra.Command, args []string) {
		var verb string
		for _, a := range args {
			if !strings.HasPrefix(a, "-") && a != "cmd" {
				verb = a
				break
			}
		}
		if verb == "" {
			defaultHelp(cc, args)
			fmt.Fprintf(cc.OutOrStdout(), "\nVerbs (cairn cmd VERB --help shows a verb's fields):\n  %s\n", strings.Join(schemas.Verbs(), "\n  "))
			return
		}
		title, fields, err := schemas.CommandFields(verb)
		if err != nil {
			fmt.Fprintln(cc.ErrOrStderr(), err)
			return
		}
		out := cc.OutOrStdout()
		fmt.Fprintf(out, "%s\n\nFields of the JSON body:\n", title)
		for _, f := range fields {
			req := ""
			if f.Required {
				req = " (required)"
			}
			if f.Description != "" {
				req += ": " + f.Description
			}
			fmt.Fprintf(out, "  %-24s %s%s\n", f.Name, f.Type, req)
		}
		seen := map[string]bool{}
		for _, f := range fields {
			if g := strings.Join(f.Either, ", "); len(f.Either) > 1 && !seen[g] {
				seen[g] = true
				fmt.Fprintf(out, "  at least one of: %s\n", g)
			}
		}
		fmt.Fprintf(out, "\nSee docs/ for each verb's rules and refusals. Flags:\n%s", cc.LocalFlags().FlagUsages())
	})
	f := c.Flags()
	f.StringVar(&natsURL, "nats", defaultNATS, "NATS server URL")
	f.StringVar(&creds, "creds", "", "NATS credentials file")
	f.StringVar(&commandID, "command-id", "", "idempotency key (Cairn-Command-Id); the same id returns the first reply")
	f.StringVar(&actor, "actor", defaultActor(), "who sends the command (recorded in every event)")
	f.DurationVar(&timeout, "timeout", 30*time.Second, "how long to wait for the reply")
	return c
}
