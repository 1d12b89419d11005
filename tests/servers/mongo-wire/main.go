// Command liminal-mongo-wire is a MongoDB wire-protocol server for liminal's tests: FerretDB 1.x
// embedded, on its SQLite backend, listening on loopback only.
//
//	liminal-mongo-wire [-listen 127.0.0.1:0] [-unix PATH] -data DIR
//
// It prints one line to stdout once it accepts connections, the URL to give pymongo
// (mongodb://127.0.0.1:PORT/), logs only warnings to stderr, and exits on SIGTERM or SIGINT.
// With -unix it listens on that Unix socket too: a path reaches processes in another network
// namespace (the acceptance tests' loopback-only sandbox) where a port does not.
//
// Why a main module of our own rather than `go install .../cmd/ferretdb`: FerretDB's own command
// reads build/version/version.txt, which the Go module proxy's zip does not carry, and panics at
// start ("Invalid build/version/version.txt file content"). It does so only when the binary's main
// module is FerretDB's; the embeddable package used here is FerretDB's supported way to run it
// from another program, and it turns telemetry off.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/FerretDB/FerretDB/ferretdb"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "TCP address to listen on (port 0: any free port)")
	unix := flag.String("unix", "", "Unix socket path to listen on as well (optional)")
	data := flag.String("data", "", "directory for the SQLite files (created if missing)")
	flag.Parse()
	if err := run(*listen, *unix, *data); err != nil {
		fmt.Fprintln(os.Stderr, "liminal-mongo-wire:", err)
		os.Exit(2)
	}
}

func run(listen, unix, data string) error {
	if data == "" {
		return fmt.Errorf("-data DIR is required")
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("-listen %q: %w", listen, err)
	}
	// A test server without authentication must not be reachable from other machines.
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("-listen %q: only a loopback address is accepted", listen)
	}
	dir, err := filepath.Abs(data)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{TCP: listen, Unix: unix},
		Logger:    logger,
		Handler:   "sqlite",
		SQLiteURL: "file:" + dir + "/", // FerretDB wants a directory URI with its trailing slash
	})
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()

	// MongoDBURI waits until the listener is bound, so this line means "ready" and names the
	// port the kernel chose.
	fmt.Println(f.MongoDBURI())

	return <-done
}
