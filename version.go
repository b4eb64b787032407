package cairn

// Version is this build's version: set with -ldflags "-X github.com/cairn-io/cairn.Version=…"
// by release builds, "dev" otherwise. The LINSTOR API shows it as the controller version.
var Version = "dev"
