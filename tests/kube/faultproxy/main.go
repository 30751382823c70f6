// faultproxy: the network and API-server faults of the drasync reliability
// tests (issue 15), standard library only so that it builds offline.
//
//	faultproxy tcp --listen ADDR --to ADDR --control ADDR
//	               [--latency-ms N] [--rate-kbit N] [--loss PCT]
//	faultproxy api --listen ADDR --kubeconfig ADMIN_KUBECONFIG --control ADDR
//	               --write-kubeconfig PATH
//
// tcp forwards a byte stream (the agents' link) and can cut it, delay it,
// throttle it and emulate loss; api is a TLS-terminating reverse proxy in
// front of a real kube-apiserver that answers a chosen share of requests
// with 429, 503 or a reset connection. Both are driven over plain HTTP on
// --control (JSON answers) and log every fault to stderr; SIGTERM ends them.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func usage() {
	fmt.Fprintf(os.Stderr, `usage:
  faultproxy tcp --listen 127.0.0.1:PORT --to 127.0.0.1:PORT --control 127.0.0.1:PORT
                 [--latency-ms N] [--rate-kbit N] [--loss PCT]
  faultproxy api --listen 127.0.0.1:PORT --kubeconfig ADMIN_KUBECONFIG --control 127.0.0.1:PORT
                 --write-kubeconfig PATH
`)
	os.Exit(2)
}

func main() {
	log.SetFlags(log.Ldate | log.Ltime | log.Lmicroseconds)
	log.SetPrefix("faultproxy: ")
	if len(os.Args) < 2 {
		usage()
	}
	mode, args := os.Args[1], os.Args[2:]
	fs := flag.NewFlagSet("faultproxy "+mode, flag.ExitOnError)
	listen := fs.String("listen", "", "address to listen on")
	control := fs.String("control", "", "address of the control HTTP server")
	var mux *http.ServeMux
	var stop func()

	switch mode {
	case "tcp":
		to := fs.String("to", "", "address to forward to")
		latency := fs.Int("latency-ms", 0, "added one-way latency in each direction (ms)")
		rate := fs.Int("rate-kbit", 0, "per-direction throughput cap (kbit/s, 0: none)")
		loss := fs.Float64("loss", 0, "percentage of chunks held back a retransmission timeout")
		_ = fs.Parse(args)
		if *listen == "" || *to == "" || *control == "" || fs.NArg() != 0 ||
			*latency < 0 || *rate < 0 || *loss < 0 || *loss > 100 {
			usage()
		}
		p, err := newTCPProxy(*listen, *to, shaping{LatencyMs: *latency, RateKbit: *rate, LossPct: *loss})
		if err != nil {
			log.Fatalf("tcp: %v", err)
		}
		mux = p.controlMux()
		stop = p.close
		go p.serve()
	case "api":
		kubeconfig := fs.String("kubeconfig", "", "admin kubeconfig of the real API server")
		out := fs.String("write-kubeconfig", "", "where to write the kubeconfig that points at the proxy")
		_ = fs.Parse(args)
		if *listen == "" || *kubeconfig == "" || *control == "" || *out == "" || fs.NArg() != 0 {
			usage()
		}
		p, err := newAPIProxy(*listen, *kubeconfig, *out)
		if err != nil {
			log.Fatalf("api: %v", err)
		}
		mux = p.controlMux()
		stop = p.close
		go p.serve()
	default:
		usage()
	}

	cl, err := net.Listen("tcp", *control)
	if err != nil {
		log.Fatalf("control: %v", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(cl); err != nil && err != http.ErrServerClosed {
			log.Fatalf("control: %v", err)
		}
	}()
	log.Printf("%s: listening on %s, control on %s", mode, *listen, cl.Addr())

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	s := <-sig
	log.Printf("%s: %v, exiting", mode, s)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
	stop()
}

// writeJSON answers v as JSON (the control server's only content type).
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func controlError(w http.ResponseWriter, code int, format string, a ...any) {
	writeJSON(w, code, map[string]string{"error": fmt.Sprintf(format, a...)})
}

// onlyMethod wraps h so that other methods get 405.
func onlyMethod(method string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != method {
			w.Header().Set("Allow", method)
			controlError(w, http.StatusMethodNotAllowed, "%s %s: use %s", r.Method, r.URL.Path, method)
			return
		}
		h(w, r)
	}
}
