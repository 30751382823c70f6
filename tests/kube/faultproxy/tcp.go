package main

import (
	"errors"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The extra delay a "lost" chunk gets: a TCP stream cannot lose bytes, so a
// lossy link shows as segments arriving one retransmission timeout late
// (Linux's minimum RTO), order kept.
const retransmitDelay = 200 * time.Millisecond

// What the link does to the bytes it carries; changed live by POST /set.
type shaping struct {
	LatencyMs int     // added one way, in each direction
	RateKbit  int     // per-direction cap, 0: none
	LossPct   float64 // share of chunks held back retransmitDelay
}

type tcpProxy struct {
	ln net.Listener
	to string

	mu    sync.Mutex
	shape shaping
	cut   bool
	pairs map[*pair]struct{}

	connections, active atomic.Int64
	bytesUp, bytesDown  atomic.Int64 // delivered client->server, server->client
}

// One proxied connection: the client's and the server's ends.
type pair struct {
	client, server net.Conn
	done           chan struct{}
	once           sync.Once
}

func (p *pair) close() {
	p.once.Do(func() {
		close(p.done)
		p.client.Close()
		p.server.Close()
	})
}

// A read from one end, to be written to the other at `at`.
type chunk struct {
	data []byte
	at   time.Time
}

func newTCPProxy(listen, to string, s shaping) (*tcpProxy, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	return &tcpProxy{ln: ln, to: to, shape: s, pairs: map[*pair]struct{}{}}, nil
}

func (t *tcpProxy) shaping() shaping {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.shape
}

func (t *tcpProxy) serve() {
	for {
		c, err := t.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			log.Printf("tcp: accept: %v", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		t.mu.Lock()
		cut := t.cut
		t.mu.Unlock()
		if cut {
			// The link is down: the connection is refused as the
			// peer would see it through a dead path, at once.
			c.Close()
			continue
		}
		go t.handle(c)
	}
}

func (t *tcpProxy) handle(c net.Conn) {
	s, err := net.DialTimeout("tcp", t.to, 5*time.Second)
	if err != nil {
		log.Printf("tcp: dial %s: %v", t.to, err)
		c.Close()
		return
	}
	p := &pair{client: c, server: s, done: make(chan struct{})}
	t.mu.Lock()
	if t.cut { // cut while we dialled
		t.mu.Unlock()
		p.close()
		return
	}
	t.pairs[p] = struct{}{}
	t.mu.Unlock()
	t.connections.Add(1)
	t.active.Add(1)

	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); t.pipe(p, c, s, &t.bytesUp) }()
	go func() { defer wg.Done(); t.pipe(p, s, c, &t.bytesDown) }()
	wg.Wait()
	p.close()
	t.mu.Lock()
	delete(t.pairs, p)
	t.mu.Unlock()
	t.active.Add(-1)
}

// pipe carries src's bytes to dst, delayed and throttled, until src ends
// (dst's write side is then shut, as TCP half-close passes through) or the
// pair is closed.
func (t *tcpProxy) pipe(p *pair, src, dst net.Conn, count *atomic.Int64) {
	// About a megabyte in flight per direction at most: the sender sees
	// back-pressure as it would from a real window.
	ch := make(chan chunk, 64)
	go func() {
		defer close(ch)
		var last time.Time
		for {
			buf := make([]byte, 16384)
			n, err := src.Read(buf)
			if n > 0 {
				sh := t.shaping()
				at := time.Now().Add(time.Duration(sh.LatencyMs) * time.Millisecond)
				if sh.LossPct > 0 && rand.Float64()*100 < sh.LossPct {
					at = at.Add(retransmitDelay)
				}
				if at.Before(last) {
					at = last
				}
				last = at
				select {
				case ch <- chunk{data: buf[:n], at: at}:
				case <-p.done:
					return
				}
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					p.close()
				}
				return
			}
		}
	}()

	var lim limiter
	for c := range ch {
		if d := time.Until(c.at); d > 0 {
			select {
			case <-time.After(d):
			case <-p.done:
				return
			}
		}
		for off := 0; off < len(c.data); {
			n := len(c.data) - off
			if n > 4096 {
				n = 4096
			}
			if !lim.wait(t.shaping().RateKbit, n, p.done) {
				return
			}
			w, err := dst.Write(c.data[off : off+n])
			count.Add(int64(w))
			if err != nil {
				p.close()
				return
			}
			off += n
		}
	}
	if tc, ok := dst.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

// A token bucket in bytes that may go into debt: a write of n bytes waits
// until the debt it leaves is paid at the current rate.
type limiter struct {
	tokens float64
	last   time.Time
}

// wait blocks until n bytes may pass at rateKbit (0: at once); false when
// done closed first.
func (l *limiter) wait(rateKbit, n int, done <-chan struct{}) bool {
	now := time.Now()
	if rateKbit <= 0 {
		l.tokens, l.last = 0, now
		return true
	}
	rate := float64(rateKbit) * 1000 / 8 // bytes per second
	burst := rate / 50                   // 20 ms worth
	if burst < 4096 {
		burst = 4096
	}
	if !l.last.IsZero() {
		l.tokens += now.Sub(l.last).Seconds() * rate
	} else {
		l.tokens = burst
	}
	if l.tokens > burst {
		l.tokens = burst
	}
	l.last = now
	l.tokens -= float64(n)
	if l.tokens >= 0 {
		return true
	}
	select {
	case <-time.After(time.Duration(-l.tokens / rate * float64(time.Second))):
		return true
	case <-done:
		return false
	}
}

func (t *tcpProxy) stats() map[string]any {
	t.mu.Lock()
	cut := t.cut
	t.mu.Unlock()
	return map[string]any{
		"connections": t.connections.Load(),
		"active":      t.active.Load(),
		"bytes_up":    t.bytesUp.Load(),
		"bytes_down":  t.bytesDown.Load(),
		"cut":         cut,
	}
}

func (t *tcpProxy) setCut(cut bool) {
	n := t.dropAll(cut)
	if cut {
		log.Printf("tcp: fault: link cut, %d connection(s) closed, new ones refused", n)
	} else {
		log.Printf("tcp: link restored")
	}
}

// dropAll sets the cut flag and, when set, closes every connection; returns how many.
func (t *tcpProxy) dropAll(cut bool) int {
	t.mu.Lock()
	t.cut = cut
	var victims []*pair
	if cut {
		for p := range t.pairs {
			victims = append(victims, p)
		}
	}
	t.mu.Unlock()
	for _, p := range victims {
		p.close()
	}
	return len(victims)
}

func (t *tcpProxy) controlMux() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("/stats", onlyMethod("GET", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, t.stats())
	}))
	m.HandleFunc("/cut", onlyMethod("POST", func(w http.ResponseWriter, r *http.Request) {
		t.setCut(true)
		writeJSON(w, 200, t.stats())
	}))
	m.HandleFunc("/restore", onlyMethod("POST", func(w http.ResponseWriter, r *http.Request) {
		t.setCut(false)
		writeJSON(w, 200, t.stats())
	}))
	m.HandleFunc("/set", onlyMethod("POST", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		sh := t.shaping()
		for _, f := range []struct {
			name string
			set  func(string) error
		}{
			{"latency_ms", func(v string) (err error) { sh.LatencyMs, err = nonNegInt(v); return }},
			{"rate_kbit", func(v string) (err error) { sh.RateKbit, err = nonNegInt(v); return }},
			{"loss", func(v string) (err error) { sh.LossPct, err = percent(v); return }},
		} {
			if v := q.Get(f.name); v != "" {
				if err := f.set(v); err != nil {
					controlError(w, 400, "%s=%s: %v", f.name, v, err)
					return
				}
			}
		}
		t.mu.Lock()
		t.shape = sh
		t.mu.Unlock()
		log.Printf("tcp: fault: latency %d ms, rate %d kbit/s, loss %g%%", sh.LatencyMs, sh.RateKbit, sh.LossPct)
		writeJSON(w, 200, map[string]any{"latency_ms": sh.LatencyMs, "rate_kbit": sh.RateKbit, "loss": sh.LossPct})
	}))
	return m
}

func (t *tcpProxy) close() {
	t.ln.Close()
	t.dropAll(true)
}

func nonNegInt(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err == nil && n < 0 {
		err = errors.New("must not be negative")
	}
	return n, err
}

func percent(v string) (float64, error) {
	f, err := strconv.ParseFloat(v, 64)
	if err == nil && (f < 0 || f > 100) {
		err = errors.New("must be between 0 and 100")
	}
	return f, err
}
