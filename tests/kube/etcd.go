package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// runEtcd runs a single-member etcd with TLS on its client and peer URLs.
func runEtcd(args []string) int {
	fs := flag.NewFlagSet("etcd", flag.ContinueOnError)
	dataDir := fs.String("data-dir", "", "data directory")
	name := fs.String("name", "default", "member name")
	client := fs.String("listen-client", "", "client URL, https://127.0.0.1:PORT")
	peer := fs.String("listen-peer", "", "peer URL, https://127.0.0.1:PORT")
	cert := fs.String("cert-file", "", "server/peer certificate")
	key := fs.String("key-file", "", "server/peer key")
	ca := fs.String("trusted-ca-file", "", "CA that signs client and peer certificates")
	unsafeNoFsync := fs.Bool("unsafe-no-fsync", false, "skip fsync (tests only)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dataDir == "" || *client == "" || *peer == "" {
		fmt.Fprintln(os.Stderr, "etcd: --data-dir, --listen-client and --listen-peer are required")
		return 2
	}
	cu, err := url.Parse(*client)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd: --listen-client: %v\n", err)
		return 2
	}
	pu, err := url.Parse(*peer)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd: --listen-peer: %v\n", err)
		return 2
	}

	cfg := embed.NewConfig()
	cfg.Name = *name
	cfg.Dir = *dataDir
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "warn"
	cfg.UnsafeNoFsync = *unsafeNoFsync
	if *cert != "" {
		cfg.ClientTLSInfo.CertFile = *cert
		cfg.ClientTLSInfo.KeyFile = *key
		cfg.ClientTLSInfo.TrustedCAFile = *ca
		cfg.ClientTLSInfo.ClientCertAuth = *ca != ""
		cfg.PeerTLSInfo.CertFile = *cert
		cfg.PeerTLSInfo.KeyFile = *key
		cfg.PeerTLSInfo.TrustedCAFile = *ca
		cfg.PeerTLSInfo.ClientCertAuth = *ca != ""
	}

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd: start: %v\n", err)
		return 1
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
		fmt.Fprintf(os.Stderr, "etcd: ready on %s\n", cu.String())
	case <-time.After(60 * time.Second):
		fmt.Fprintln(os.Stderr, "etcd: not ready after 60s")
		e.Server.Stop()
		return 1
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case s := <-sig:
		fmt.Fprintf(os.Stderr, "etcd: %v, stopping\n", s)
		return 0
	case err := <-e.Err():
		fmt.Fprintf(os.Stderr, "etcd: %v\n", err)
		return 1
	}
}
