package main

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// tokenCmd manages the bearer tokens of the HTTP API. Create and revoke are commands
// over NATS (the root of trust: whoever may send commands may make tokens); list reads
// the gateway with an admin token.
func tokenCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "token",
		Short: "Bearer tokens of the HTTP API (cairn serve --http-auth): create, list, revoke",
	}
	var natsURL, creds, actor, role string
	var expiresIn time.Duration
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Make a token with a role (viewer, operator, admin); prints it once on stdout (only its SHA-256 is stored)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			secret := make([]byte, 32)
			if _, err := rand.Read(secret); err != nil {
				return err
			}
			token := "cairn_" + base64.RawURLEncoding.EncodeToString(secret)
			sum := sha256.Sum256([]byte(token))
			body := map[string]any{"name": args[0], "role": role, "hash": hex.EncodeToString(sum[:])}
			if expiresIn > 0 {
				body["expires_at"] = time.Now().Add(expiresIn).UTC().Format(time.RFC3339)
			}
			b, _ := json.Marshal(body)
			reply, err := sendCommand(natsURL, creds, "token.create", b, "", actor, 30*time.Second)
			if err != nil {
				return err
			}
			if !reply.OK {
				out, _ := json.MarshalIndent(reply, "", "  ")
				fmt.Fprintln(os.Stderr, string(out))
				return exitError{1}
			}
			fmt.Fprintf(os.Stderr, "token %s (%s) created; it is shown once: keep it secret\n", args[0], role)
			fmt.Println(token)
			return nil
		},
	}
	create.Flags().StringVar(&role, "role", "viewer", "viewer (reads), operator (also commands), admin (also tokens)")
	create.Flags().DurationVar(&expiresIn, "expires-in", 0, "the token stops working after this long (0: never)")
	revoke := &cobra.Command{
		Use:   "revoke NAME",
		Short: "Revoke a token: every serve refuses it once its views have the event (well within a second)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, _ := json.Marshal(map[string]string{"name": args[0]})
			reply, err := sendCommand(natsURL, creds, "token.revoke", b, "", actor, 30*time.Second)
			if err != nil {
				return err
			}
			return printReply(reply)
		},
	}
	for _, sub := range []*cobra.Command{create, revoke} {
		sub.Flags().StringVar(&natsURL, "nats", defaultNATS, "NATS server URL")
		sub.Flags().StringVar(&creds, "creds", "", "NATS credentials file")
		sub.Flags().StringVar(&actor, "actor", defaultActor(), "who sends the command (recorded as the token's creator)")
		c.AddCommand(sub)
	}
	var hc httpClientFlags
	list := &cobra.Command{
		Use:   "list",
		Short: "List the tokens (name, role, creator, expiry, revocation; never the token) from the gateway (admin token)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return hc.getAndPrint("/cairn/v1/tokens")
		},
	}
	hc.register(list.Flags())
	c.AddCommand(list)
	return c
}

// httpClientFlags reach the gateway: its URL (or $CAIRN_HTTP), a token (or $CAIRN_TOKEN)
// and, for HTTPS with a private CA, the CA certificate.
type httpClientFlags struct {
	url, token, caCert string
}

func (h *httpClientFlags) register(f *pflag.FlagSet) {
	url := os.Getenv("CAIRN_HTTP")
	if url == "" {
		url = "http://127.0.0.1:3370"
	}
	f.StringVar(&h.url, "http", url, "gateway URL of cairn serve (https://… with --tls-cert; default $CAIRN_HTTP, else the serve default)")
	f.StringVar(&h.token, "token", os.Getenv("CAIRN_TOKEN"), "bearer token for cairn serve --http-auth (default $CAIRN_TOKEN)")
	f.StringVar(&h.caCert, "cacert", "", "CA certificate (PEM) the gateway's HTTPS certificate is checked against")
}

// getAndPrint GETs a gateway path and prints the JSON; an error reply exits 1.
func (h *httpClientFlags) getAndPrint(path string) error {
	body, status, err := h.get(path)
	if err != nil {
		return err
	}
	var out bytes.Buffer // the gateway answers programs compactly: indent for the reader
	if json.Indent(&out, body, "", "  ") != nil {
		out.Reset()
		out.Write(body)
	}
	fmt.Print(strings.TrimRight(out.String(), "\n") + "\n")
	if status != http.StatusOK {
		return exitError{1}
	}
	return nil
}

// client is the HTTP client for the gateway (with --cacert's pool for HTTPS).
func (h *httpClientFlags) client() (*http.Client, error) {
	if h.caCert == "" {
		return http.DefaultClient, nil
	}
	pem, err := os.ReadFile(h.caCert)
	if err != nil {
		return nil, fmt.Errorf("--cacert: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--cacert %s: no PEM certificate in it", h.caCert)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}, nil
}

// request sends method path to the gateway with the token.
func (h *httpClientFlags) request(method, path string, headers map[string]string) (*http.Response, error) {
	client, err := h.client()
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequest(method, h.url+path, nil)
	if err != nil {
		return nil, err
	}
	if h.token != "" {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	return client.Do(req)
}

// get GETs a gateway path: the body and the HTTP status.
func (h *httpClientFlags) get(path string) ([]byte, int, error) {
	resp, err := h.request(http.MethodGet, path, nil)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return body, resp.StatusCode, err
}
