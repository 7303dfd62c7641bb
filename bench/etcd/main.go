// Command etcd-embed runs one etcd member of the release this module
// requires (go.etcd.io/etcd/server/v3, embed package) for the benchmarks
// that compare Causeway with etcd. It is its own module so that Causeway's
// go.mod does not take etcd server's dependencies.
//
// The flags keep etcd's own names; everything else is etcd's default
// (fsync on, snapshot count, 100 ms heartbeat, 1 s election timeout).
// It prints a ready line once the member serves clients, and closes the
// member cleanly on SIGTERM or SIGINT.
//
//	cd bench/etcd && go build -o ../../bin/etcd-embed .
//	bin/etcd-embed --name e1 --data-dir data/e1 \
//	    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
//	    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
//	    --initial-cluster e1=http://127.0.0.1:2380
package main

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/api/v3/version"
	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "etcd-embed:", err)
		os.Exit(1)
	}
}

// versionLine is what --version prints and the ready line carries.
func versionLine() string { return "etcd " + version.Version + " (embed)" }

func run(args []string) error {
	cfg := embed.NewConfig()
	fs := flag.NewFlagSet("etcd-embed", flag.ContinueOnError)
	showVersion := fs.Bool("version", false, "print the etcd version and exit")
	fs.StringVar(&cfg.Name, "name", cfg.Name, "human-readable name of this member")
	fs.StringVar(&cfg.Dir, "data-dir", "", "path to the data directory (default ${name}.etcd)")
	listenClient := fs.String("listen-client-urls", embed.DefaultListenClientURLs, "comma-separated URLs to listen on for client traffic")
	advertiseClient := fs.String("advertise-client-urls", embed.DefaultAdvertiseClientURLs, "comma-separated client URLs of this member advertised to the cluster")
	listenPeer := fs.String("listen-peer-urls", embed.DefaultListenPeerURLs, "comma-separated URLs to listen on for peer traffic")
	advertisePeer := fs.String("initial-advertise-peer-urls", embed.DefaultInitialAdvertisePeerURLs, "comma-separated peer URLs of this member advertised to the rest of the cluster")
	fs.StringVar(&cfg.InitialCluster, "initial-cluster", "", "initial cluster configuration for bootstrapping, NAME=PEER_URL,... (default ${name}=${initial-advertise-peer-urls})")
	fs.StringVar(&cfg.ClusterState, "initial-cluster-state", cfg.ClusterState, "initial cluster state: new or existing")
	fs.StringVar(&cfg.InitialClusterToken, "initial-cluster-token", cfg.InitialClusterToken, "initial cluster token for the etcd cluster during bootstrap")
	fs.StringVar(&cfg.LogLevel, "log-level", "warn", "debug, info, warn, error, panic or fatal")
	fs.Int64Var(&cfg.QuotaBackendBytes, "quota-backend-bytes", cfg.QuotaBackendBytes, "raise alarms when the backend size exceeds this quota (0: etcd's default)")
	fs.UintVar(&cfg.TickMs, "heartbeat-interval", cfg.TickMs, "time (in milliseconds) of a heartbeat interval")
	fs.UintVar(&cfg.ElectionMs, "election-timeout", cfg.ElectionMs, "time (in milliseconds) for an election to timeout")
	readyTimeout := fs.Duration("ready-timeout", 60*time.Second, "how long to wait for the member to become ready (joined the cluster, serving clients)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *showVersion {
		fmt.Println(versionLine())
		return nil
	}
	for _, u := range []struct {
		flag, val string
		dst       *[]url.URL
	}{
		{"listen-client-urls", *listenClient, &cfg.ListenClientUrls},
		{"advertise-client-urls", *advertiseClient, &cfg.AdvertiseClientUrls},
		{"listen-peer-urls", *listenPeer, &cfg.ListenPeerUrls},
		{"initial-advertise-peer-urls", *advertisePeer, &cfg.AdvertisePeerUrls},
	} {
		urls, err := parseURLs(u.val)
		if err != nil {
			return fmt.Errorf("--%s: %w", u.flag, err)
		}
		*u.dst = urls
	}
	if cfg.Dir == "" {
		cfg.Dir = cfg.Name + ".etcd"
	}
	if cfg.InitialCluster == "" {
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	}
	cfg.Logger = "zap"
	cfg.LogOutputs = []string{embed.StdErrLogOutput}

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)

	timer := time.NewTimer(*readyTimeout)
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("member %s failed before it was ready: %w", cfg.Name, err)
	case <-timer.C:
		e.Server.Stop() // a member that is not ready may not stop on Close alone
		e.Close()
		return fmt.Errorf("member %s not ready after %v: the other members of --initial-cluster %s did not form a quorum with it", cfg.Name, *readyTimeout, cfg.InitialCluster)
	case s := <-sigs:
		e.Server.Stop()
		e.Close()
		return fmt.Errorf("%v before the member was ready", s)
	}
	fmt.Printf("etcd-embed: %s ready: member %s (id %x), clients on %s\n", versionLine(), cfg.Name, uint64(e.Server.MemberID()), urlList(cfg.AdvertiseClientUrls))

	select {
	case s := <-sigs:
		fmt.Fprintf(os.Stderr, "etcd-embed: %v: closing member %s\n", s, cfg.Name)
		e.Close()
		return nil
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("member %s: %w", cfg.Name, err)
	case <-e.Server.StopNotify():
		e.Close()
		return fmt.Errorf("member %s stopped (removed from the cluster or a fatal error; see its log)", cfg.Name)
	}
}

func parseURLs(s string) ([]url.URL, error) {
	var out []url.URL
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		u, err := url.Parse(f)
		if err != nil {
			return nil, err
		}
		if u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "unix" && u.Scheme != "unixs" {
			return nil, fmt.Errorf("%q: want http://HOST:PORT", f)
		}
		out = append(out, *u)
	}
	if len(out) == 0 {
		return nil, errors.New("no URL")
	}
	return out, nil
}

func urlList(us []url.URL) string {
	ss := make([]string, len(us))
	for i, u := range us {
		ss[i] = u.String()
	}
	return strings.Join(ss, ",")
}
