// Package natsauth is the NATS authorization of an embedded `cairn serve --auth`: one
// control-plane user with full access (serve itself, the cairn CLI, the nats CLI) and
// one user per node whose agent may read only its own desired state and report only
// its own status.
//
// # How it works
//
// The data directory holds one secret, a random 32-byte master key
// (<data>/auth/master.key, created on first use, mode 0600). Every user is an nkey
// (an ed25519 key pair) whose seed is derived from the master key: HMAC-SHA256(master,
// "cairn nats user v1\x00" + "control" or "node\x00" + node name). So `cairn auth
// node-creds NODE` can produce a node's credentials at any time, offline, and the server
// authorizes any node name without a reload or a restart: it derives the node's public
// key from the name the client connects with and checks that the client signed the
// server's nonce with the matching key. No secret crosses the wire.
//
// cairn serve installs this as a custom authenticator in its embedded nats-server (no
// operator, no accounts: everything stays in the default account, so an existing
// JetStream store keeps working when --auth is turned on). A client connects
//   - as the control user: nkey only (no user name); full access;
//   - as node N: user name N (or, as the nats CLI sends `--user N`, token N) plus N's
//     nkey; the permissions below.
//
// Credentials files (CredsFile) carry the role, the node name and the decorated user
// seed; the nats CLI reads the seed from them too (`nats --nkey FILE`, control user).
//
// A node's user (NodePermissions) may
//   - subscribe to <prefix>.node.<node>.> and to its inbox _INBOX.<prefix>.node.<node>.>
//     (the agent connects with nats.CustomInboxPrefix(Names.NodeInbox(node)));
//   - publish to <prefix>.status.<node>.>;
//   - ask for a remote's credentials (<prefix>.agent.<node>.remote) and read the
//     received store through a serve (<prefix>.agent.<node>.received), as itself;
//   - send its attach request (<prefix>.agent.<node>.attach: a serve (re)creates the
//     node's consumer, agent-<node>, with the node's filter) and pull from and look up
//     that one consumer ($JS.API.CONSUMER.{MSG.NEXT,INFO}.<STREAM>.agent-<node>);
//   - nothing else: no commands, no events, no other stream, no direct gets, no other
//     node, and no consumer it could create, configure or delete (so no push consumer
//     delivering anywhere, no pulling from or deleting another node's consumer).
//
// Credentials cannot be revoked one by one: a node's credentials stay valid after
// node.remove. To invalidate every credential, replace master.key (stop serve, delete
// it, start serve, hand out new credentials files).
package natsauth

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/cairn-io/cairn/events"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/rs/zerolog"
)

// Files under the auth directory (<data>/auth).
const (
	DirName          = "auth"
	MasterKeyFile    = "master.key"  // the one secret: 32 random bytes, hex, mode 0600
	ControlCredsFile = "cairn.creds" // the control user's credentials, mode 0600
)

// Roles of a credentials file.
const (
	RoleControl = "control"
	RoleNode    = "node"
)

// nodeNameRE is the schema's node name (defs.json node_name): labels of letters,
// digits, '-' and '_' joined by dots; in subjects each dot is a tilde (events.Token), so
// a node's subjects stay one token.
var nodeNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,62}(\.[A-Za-z0-9][A-Za-z0-9_-]{0,62})*$`)

// CheckNode refuses a node name that is not a valid Cairn node name (and so could widen
// the node's subjects: "*", ">", "~").
func CheckNode(node string) error {
	if len(node) > 253 || !nodeNameRE.MatchString(node) {
		return fmt.Errorf("node %q: must be labels of 1-63 letters, digits, '-' or '_', each starting with a letter or digit, joined by dots (at most 253 characters)", node)
	}
	return nil
}

// Authority holds a deployment's master key: it derives every user's key, writes
// credentials files and checks connections.
type Authority struct {
	dir    string
	master []byte
}

// Open loads the master key from dir (<data>/auth). With create, a missing key is
// generated and stored (file 0600, dir 0700); two processes creating it at once end
// up with the same key. Returns an error if the key is missing and create is false,
// or if the file does not hold 32 hex-encoded bytes.
func Open(dir string, create bool) (*Authority, error) {
	path := filepath.Join(dir, MasterKeyFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && create {
		b, err = createMaster(dir, path)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no master key %s: run `cairn serve --auth` on this data directory once first", path)
	}
	if err != nil {
		return nil, fmt.Errorf("master key: %w", err)
	}
	master, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(master) != 32 {
		return nil, fmt.Errorf("master key %s: must hold 32 bytes as 64 hex digits", path)
	}
	return &Authority{dir: dir, master: master}, nil
}

func createMaster(dir, path string) ([]byte, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	data := []byte(hex.EncodeToString(key) + "\n")
	if err := writeExclusive(path, data); errors.Is(err, fs.ErrExist) {
		return os.ReadFile(path) // someone else created it first: use theirs
	} else if err != nil {
		return nil, err
	}
	return data, nil
}

// writeExclusive creates path with data, mode 0600, synced; fs.ErrExist if it exists.
func writeExclusive(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

// Dir is the auth directory.
func (a *Authority) Dir() string { return a.dir }

// key derives the user key of a role (node "" for the control user).
func (a *Authority) key(role, node string) nkeys.KeyPair {
	mac := hmac.New(sha256.New, a.master)
	mac.Write([]byte("cairn nats user v1\x00" + role + "\x00" + node))
	kp, err := nkeys.FromRawSeed(nkeys.PrefixByteUser, mac.Sum(nil))
	if err != nil {
		panic(err) // 32 bytes and a valid prefix: cannot fail
	}
	return kp
}

// NodeKey is the public user key (U…) of node's user.
func (a *Authority) NodeKey(node string) (string, error) {
	if err := CheckNode(node); err != nil {
		return "", err
	}
	return a.key(RoleNode, node).PublicKey()
}

// NodeCreds returns the credentials file of node's agent. The same node always gets
// the same file (until the master key changes). Returns an error for an invalid name.
func (a *Authority) NodeCreds(node string) ([]byte, error) {
	if err := CheckNode(node); err != nil {
		return nil, err
	}
	return formatCreds(RoleNode, node, a.key(RoleNode, node))
}

// ControlCreds returns the credentials file of the control user (full access).
func (a *Authority) ControlCreds() ([]byte, error) {
	return formatCreds(RoleControl, "", a.key(RoleControl, ""))
}

// EnsureControlCreds writes the control credentials to <dir>/cairn.creds (0600) and
// returns its path; a file left from an earlier master key is replaced (atomically), one
// that is current is left alone. serve connects with them; operators point
// `cairn cmd --creds` (and `nats --nkey`) at the same file.
func (a *Authority) EnsureControlCreds() (string, error) {
	path := filepath.Join(a.dir, ControlCredsFile)
	creds, err := a.ControlCreds()
	if err != nil {
		return "", err
	}
	err = writeExclusive(path, creds)
	if errors.Is(err, fs.ErrExist) {
		if have, rerr := os.ReadFile(path); rerr == nil && bytes.Equal(have, creds) {
			return path, nil
		}
		tmp := path + ".new"
		_ = os.Remove(tmp)
		if err = writeExclusive(tmp, creds); err == nil {
			err = os.Rename(tmp, path)
		}
	}
	if err != nil {
		return "", fmt.Errorf("control credentials: %w", err)
	}
	return path, nil
}

// Creds is a parsed credentials file.
type Creds struct {
	Role string // RoleControl or RoleNode
	Node string // the node, for RoleNode
	Key  nkeys.KeyPair
}

// formatCreds renders a credentials file:
//
//	# Cairn NATS credentials. Secret: keep it mode 0600.
//	role: node
//	node: n1
//
//	-----BEGIN USER NKEY SEED-----
//	SU…
//	------END USER NKEY SEED------
func formatCreds(role, node string, kp nkeys.KeyPair) ([]byte, error) {
	seed, err := kp.Seed()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("# Cairn NATS credentials (cairn serve --auth). Secret: keep it mode 0600.\n")
	fmt.Fprintf(&b, "role: %s\n", role)
	if node != "" {
		fmt.Fprintf(&b, "node: %s\n", node)
	}
	fmt.Fprintf(&b, "\n-----BEGIN USER NKEY SEED-----\n%s\n------END USER NKEY SEED------\n", seed)
	return b.Bytes(), nil
}

// ParseCreds reads a credentials file written by NodeCreds or ControlCreds. Returns an
// error naming what is missing or wrong (role, node, seed).
func ParseCreds(data []byte) (Creds, error) {
	var c Creds
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.HasPrefix(k, "#") {
			continue
		}
		switch strings.TrimSpace(k) {
		case "role":
			c.Role = strings.TrimSpace(v)
		case "node":
			c.Node = strings.TrimSpace(v)
		}
	}
	switch c.Role {
	case RoleControl:
		if c.Node != "" {
			return Creds{}, errors.New("credentials: role control takes no node")
		}
	case RoleNode:
		if err := CheckNode(c.Node); err != nil {
			return Creds{}, fmt.Errorf("credentials: %w", err)
		}
	case "":
		return Creds{}, errors.New("credentials: no role line (not a Cairn credentials file)")
	default:
		return Creds{}, fmt.Errorf("credentials: role %q: must be control or node", c.Role)
	}
	kp, err := nkeys.ParseDecoratedUserNKey(data)
	if err != nil {
		return Creds{}, fmt.Errorf("credentials: user seed: %w", err)
	}
	c.Key = kp
	return c, nil
}

// ConnectOptions are the nats.go options that authenticate with the credentials file
// at path: a Cairn credentials file (control: the nkey; node: the node name and its
// nkey), or a standard NATS .creds file (user JWT and seed, for an external NATS
// system), told apart by content. Returns an error if the file cannot be read or is
// neither.
func ConnectOptions(path string) ([]nats.Option, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if bytes.Contains(data, []byte("BEGIN NATS USER JWT")) {
		return []nats.Option{nats.UserCredentials(path)}, nil
	}
	c, err := ParseCreds(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c.Options()
}

// Options are the nats.go options that authenticate with c.
func (c Creds) Options() ([]nats.Option, error) {
	pub, err := c.Key.PublicKey()
	if err != nil {
		return nil, err
	}
	opts := []nats.Option{nats.Nkey(pub, c.Key.Sign)}
	if c.Role == RoleNode {
		opts = append(opts, nats.UserInfo(c.Node, ""))
	}
	return opts, nil
}

// NodePermissions are the permissions of node's user (see the package comment).
func NodePermissions(names events.Names, node string) *natsserver.Permissions {
	stream, consumer := names.NodesStream(), names.AgentConsumer(node)
	return &natsserver.Permissions{
		Publish: &natsserver.SubjectPermission{Allow: []string{
			names.StatusFilter(node),
			names.AgentAttach(node),
			names.AgentRemote(node),
			names.AgentReceived(node),
			"$JS.API.CONSUMER.MSG.NEXT." + stream + "." + consumer,
			"$JS.API.CONSUMER.INFO." + stream + "." + consumer,
		}},
		Subscribe: &natsserver.SubjectPermission{Allow: []string{
			names.NodeFilter(node),
			names.NodeInbox(node) + ".>",
		}},
	}
}

// Authenticator returns the nats-server custom authentication that admits this
// Authority's users with the permissions of their role in the deployment of names.
// The server must present a nonce (EmbeddedOptions.Auth sets AlwaysEnableNonce).
// Every refusal is logged at warn with the reason.
func (a *Authority) Authenticator(names events.Names, log zerolog.Logger) natsserver.Authentication {
	control, _ := a.key(RoleControl, "").PublicKey()
	return &authenticator{a: a, control: control, names: names, log: log}
}

type authenticator struct {
	a       *Authority
	control string
	names   events.Names
	log     zerolog.Logger
}

func (v *authenticator) Check(c natsserver.ClientAuthentication) bool {
	user, err := v.check(c)
	if err != nil {
		addr := ""
		if ra := c.RemoteAddress(); ra != nil {
			addr = ra.String()
		}
		v.log.Warn().Err(err).Str("remote", addr).Str("client", c.GetOpts().Name).Msg("NATS connection refused")
		return false
	}
	v.log.Debug().Str("user", user.Username).Str("client", c.GetOpts().Name).Msg("NATS connection authorized")
	c.RegisterUser(user)
	return true
}

// check verifies a connection's credentials and returns its user.
func (v *authenticator) check(c natsserver.ClientAuthentication) (*natsserver.User, error) {
	if c.Kind() != natsserver.CLIENT {
		return nil, fmt.Errorf("connection kind %d not allowed", c.Kind())
	}
	opts := c.GetOpts()
	if opts.Nkey == "" {
		return nil, errors.New("no nkey (connect with a credentials file from cairn serve --auth or cairn auth node-creds)")
	}
	if opts.Password != "" {
		return nil, errors.New("password given: credentials are an nkey and, for a node, its name as user")
	}
	// A node's name comes as the user name; the nats CLI sends `--user N` without a
	// password as a token instead.
	name := opts.Username
	if name == "" {
		name = opts.Token
	} else if opts.Token != "" {
		return nil, errors.New("user name and token given")
	}
	user := &natsserver.User{}
	if name == "" {
		if opts.Nkey != v.control {
			return nil, fmt.Errorf("nkey %s is not the control user's", opts.Nkey)
		}
		user.Username = "control"
	} else {
		want, err := v.a.NodeKey(name)
		if err != nil {
			return nil, fmt.Errorf("user name: %w", err)
		}
		if opts.Nkey != want {
			return nil, fmt.Errorf("nkey %s is not node %s's", opts.Nkey, name)
		}
		user.Username = "node:" + name
		user.Permissions = NodePermissions(v.names, name)
	}
	if err := verifyNonce(opts.Nkey, c.GetNonce(), opts.Sig); err != nil {
		return nil, fmt.Errorf("%s: %w", user.Username, err)
	}
	return user, nil
}

// verifyNonce checks that sig (base64, as clients send it) is the signature of nonce
// by the user key pub.
func verifyNonce(pub string, nonce []byte, sig string) error {
	if len(nonce) == 0 {
		return errors.New("server sent no nonce (AlwaysEnableNonce off)")
	}
	if sig == "" {
		return errors.New("no nonce signature")
	}
	raw, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		if raw, err = base64.StdEncoding.DecodeString(sig); err != nil {
			return errors.New("nonce signature is not base64")
		}
	}
	kp, err := nkeys.FromPublicKey(pub)
	if err != nil {
		return fmt.Errorf("user key: %w", err)
	}
	if err := kp.Verify(nonce, raw); err != nil {
		return errors.New("nonce signature does not match the key")
	}
	return nil
}
