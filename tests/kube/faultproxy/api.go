package main

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The parts of an admin kubeconfig (tests/kube/cluster.sh) the proxy uses.
type kubeconfig struct {
	server                    string
	ca, clientCert, clientKey []byte // PEM
}

// readKubeconfig reads the first cluster and user of a kubeconfig: the
// shape cluster.sh writes (one cluster, one user, client certificates),
// embedded (*-data) or as file paths. Line-based, as the standard library
// has no YAML.
func readKubeconfig(path string) (*kubeconfig, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	kc := &kubeconfig{}
	dir := filepath.Dir(path)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		key = strings.TrimPrefix(strings.TrimSpace(key), "- ")
		val = strings.Trim(strings.TrimSpace(val), `"'`)
		var dst *[]byte
		isData := strings.HasSuffix(key, "-data")
		switch strings.TrimSuffix(key, "-data") {
		case "server":
			if kc.server == "" {
				kc.server = val
			}
			continue
		case "certificate-authority":
			dst = &kc.ca
		case "client-certificate":
			dst = &kc.clientCert
		case "client-key":
			dst = &kc.clientKey
		default:
			continue
		}
		if *dst != nil {
			continue
		}
		if isData {
			*dst, err = base64.StdEncoding.DecodeString(val)
		} else {
			if !filepath.IsAbs(val) {
				val = filepath.Join(dir, val)
			}
			*dst, err = os.ReadFile(val)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %v", path, key, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if kc.server == "" || kc.ca == nil || kc.clientCert == nil || kc.clientKey == nil {
		return nil, fmt.Errorf("%s: needs server, certificate-authority, client-certificate and client-key", path)
	}
	return kc, nil
}

// The fault to inject and on which requests.
type faultRule struct {
	kind       string // "none", "429", "503", "reset"
	ratio      float64
	retryAfter int // seconds; 429 always says it (default 1), 503 when > 0
	methods    map[string]bool
	acc        float64 // error diffusion: exactly ratio of the matching requests
}

type apiProxy struct {
	ln    net.Listener
	srv   *http.Server
	proxy *httputil.ReverseProxy

	mu   sync.Mutex
	rule faultRule

	requests, passed   atomic.Int64
	n429, n503, nReset atomic.Int64
}

func writeMethods() map[string]bool {
	return map[string]bool{"PATCH": true, "POST": true, "PUT": true, "DELETE": true}
}

func newAPIProxy(listen, kubeconfigPath, out string) (*apiProxy, error) {
	kc, err := readKubeconfig(kubeconfigPath)
	if err != nil {
		return nil, err
	}
	upstream, err := url.Parse(kc.server)
	if err != nil {
		return nil, fmt.Errorf("server %q: %v", kc.server, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(kc.ca) {
		return nil, errors.New("the kubeconfig's certificate authority holds no PEM certificate")
	}
	cert, err := tls.X509KeyPair(kc.clientCert, kc.clientKey)
	if err != nil {
		return nil, fmt.Errorf("client certificate: %v", err)
	}
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}},
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}

	caPEM, serving, err := makeServingCert()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	p := &apiProxy{ln: ln, rule: faultRule{kind: "none", methods: writeMethods()}}
	p.proxy = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(upstream)
		},
		Transport:     tr,
		FlushInterval: -1, // watches and chunked lists pass as they come
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			log.Printf("api: upstream %s %s: %v", r.Method, r.URL.RequestURI(), err)
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	p.srv = &http.Server{
		Handler:           http.HandlerFunc(p.serveHTTP),
		ReadHeaderTimeout: 30 * time.Second,
		// HTTP/1.1 only: a reset hijacks the client's connection.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{serving},
			ClientAuth:   tls.RequestClientCert, // the admin's cert is offered; upstream auth is ours
		},
		ErrorLog: log.New(os.Stderr, "faultproxy: api: http: ", log.LstdFlags),
	}
	if err := writeProxyKubeconfig(out, "https://"+ln.Addr().String(), caPEM, kc); err != nil {
		ln.Close()
		return nil, err
	}
	return p, nil
}

// makeServingCert: a fresh CA and a certificate it signs for 127.0.0.1 and
// localhost. Returns the CA's PEM and the serving pair.
func makeServingCert() ([]byte, tls.Certificate, error) {
	var none tls.Certificate
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, none, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "faultproxy CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, none, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, none, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, none, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "faultproxy"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, none, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, none, err
	}
	pair, err := tls.X509KeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		return nil, none, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), pair, nil
}

// writeProxyKubeconfig: a kubeconfig for server with our CA and the admin's
// user credentials unchanged, written atomically (a reader never sees half).
func writeProxyKubeconfig(path, server string, caPEM []byte, kc *kubeconfig) error {
	b64 := base64.StdEncoding.EncodeToString
	text := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: faultproxy
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: admin
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: faultproxy
  context:
    cluster: faultproxy
    user: admin
current-context: faultproxy
`, server, b64(caPEM), b64(kc.clientCert), b64(kc.clientKey))
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func isWatch(r *http.Request) bool {
	w := r.URL.Query().Get("watch")
	return w == "true" || w == "1" || strings.Contains(r.URL.Path, "/watch/")
}

// decide returns the fault for r ("" for none) and the rule's Retry-After.
func (p *apiProxy) decide(r *http.Request) (string, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	rule := &p.rule
	if rule.kind == "none" || rule.ratio <= 0 {
		return "", 0
	}
	m := r.Method
	if isWatch(r) {
		m = "WATCH"
	}
	if !rule.methods[m] {
		return "", 0
	}
	rule.acc += rule.ratio
	if rule.acc < 1-1e-9 { // 3 x 1/3 is one fault, whatever the rounding
		return "", 0
	}
	rule.acc--
	return rule.kind, rule.retryAfter
}

func (p *apiProxy) serveHTTP(w http.ResponseWriter, r *http.Request) {
	p.requests.Add(1)
	kind, retryAfter := p.decide(r)
	switch kind {
	case "429":
		p.n429.Add(1)
		if retryAfter <= 0 {
			retryAfter = 1
		}
		log.Printf("api: fault: 429 Retry-After %d on %s %s", retryAfter, r.Method, r.URL.RequestURI())
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
		status(w, 429, "TooManyRequests", "faultproxy: too many requests, please try again later", retryAfter)
	case "503":
		p.n503.Add(1)
		log.Printf("api: fault: 503 on %s %s", r.Method, r.URL.RequestURI())
		if retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
		}
		status(w, 503, "ServiceUnavailable", "faultproxy: the server is currently unable to handle the request", retryAfter)
	case "reset":
		p.nReset.Add(1)
		log.Printf("api: fault: reset on %s %s", r.Method, r.URL.RequestURI())
		hj, ok := w.(http.Hijacker)
		if !ok {
			log.Printf("api: cannot hijack (not HTTP/1.1): answering 503 instead")
			status(w, 503, "ServiceUnavailable", "faultproxy: reset", 0)
			return
		}
		c, _, err := hj.Hijack()
		if err != nil {
			log.Printf("api: hijack: %v", err)
			return
		}
		// SO_LINGER 0: the close sends RST, the client reads "connection reset".
		if tc, ok := c.(*tls.Conn); ok {
			if nc, ok := tc.NetConn().(*net.TCPConn); ok {
				_ = nc.SetLinger(0)
			}
		}
		c.Close()
	default:
		p.passed.Add(1)
		p.proxy.ServeHTTP(w, r)
	}
}

// status answers a metav1.Status, as the API server does for its errors.
func status(w http.ResponseWriter, code int, reason, msg string, retryAfter int) {
	st := map[string]any{
		"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{},
		"status": "Failure", "message": msg, "reason": reason, "code": code,
	}
	if retryAfter > 0 {
		st["details"] = map[string]any{"retryAfterSeconds": retryAfter}
	}
	writeJSON(w, code, st)
}

func (p *apiProxy) serve() {
	if err := p.srv.ServeTLS(p.ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatalf("api: %v", err)
	}
}

func (p *apiProxy) stats() map[string]any {
	return map[string]any{
		"requests": p.requests.Load(),
		"passed":   p.passed.Load(),
		"injected": map[string]int64{"429": p.n429.Load(), "503": p.n503.Load(), "reset": p.nReset.Load()},
	}
}

func (p *apiProxy) controlMux() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("/stats", onlyMethod("GET", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, p.stats())
	}))
	m.HandleFunc("/faults", onlyMethod("POST", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		rule := faultRule{kind: q.Get("kind"), ratio: 1, methods: writeMethods()}
		switch rule.kind {
		case "429", "503", "reset", "none":
		default:
			controlError(w, 400, "kind=%q: one of 429, 503, reset, none", rule.kind)
			return
		}
		if v := q.Get("ratio"); v != "" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f < 0 || f > 1 {
				controlError(w, 400, "ratio=%s: a fraction between 0 and 1", v)
				return
			}
			rule.ratio = f
		}
		if v := q.Get("retry_after"); v != "" {
			n, err := nonNegInt(v)
			if err != nil {
				controlError(w, 400, "retry_after=%s: %v", v, err)
				return
			}
			rule.retryAfter = n
		}
		if v := q.Get("methods"); v != "" {
			rule.methods = map[string]bool{}
			for _, m := range strings.Split(v, ",") {
				m = strings.ToUpper(strings.TrimSpace(m))
				switch m {
				case "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "WATCH":
					rule.methods[m] = true
				default:
					controlError(w, 400, "methods: %q is not a method (GET, HEAD, POST, PUT, PATCH, DELETE, WATCH)", m)
					return
				}
			}
		}
		p.mu.Lock()
		p.rule = rule
		p.mu.Unlock()
		var ms []string
		for m := range rule.methods {
			ms = append(ms, m)
		}
		sort.Strings(ms)
		log.Printf("api: faults: kind %s ratio %g retry_after %d methods %s", rule.kind, rule.ratio, rule.retryAfter, strings.Join(ms, ","))
		writeJSON(w, 200, map[string]any{"kind": rule.kind, "ratio": rule.ratio, "retry_after": rule.retryAfter, "methods": ms})
	}))
	return m
}

func (p *apiProxy) close() {
	_ = p.srv.Close()
}
