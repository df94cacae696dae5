package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

func createNamespace(ctx context.Context, client kubernetes.Interface, name string) error {
	_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	return err
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// proc is one of our binaries under measurement.
type proc struct {
	cmd  *exec.Cmd
	addr string
	done chan struct{}
}

// start runs bin with a loopback listen address added; stdout goes to stdout (nil: discarded).
func start(bin string, stdout *os.File, args ...string) (*proc, error) {
	return startEnv(bin, stdout, nil, args...)
}

// startEnv is start with extra environment variables.
func startEnv(bin string, stdout *os.File, env []string, args ...string) (*proc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	return startArgv(addr, stdout, env, append([]string{bin, "--listen-address=" + addr}, args...))
}

// startArgv runs argv as a proc listening on addr.
func startArgv(addr string, stdout *os.File, env, argv []string) (*proc, error) {
	p := &proc{addr: addr, done: make(chan struct{})}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Stdout = stdout
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	return p, nil
}

func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) get(path string) (int, string) {
	resp, err := http.Get("http://" + p.addr + path)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	var sb strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		sb.WriteString(sc.Text() + "\n")
	}
	return resp.StatusCode, sb.String()
}

func (p *proc) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if code, _ := p.get("/readyz"); code == 200 {
			return nil
		}
		select {
		case <-p.done:
			return errors.New("exited before it was ready")
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s", timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// metric sums every series of a metric family whose line starts with prefix.
func (p *proc) metric(prefix string) float64 {
	_, body := p.get("/metrics")
	sum := 0.0
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, prefix) {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return sum
}

// rssKiB reads VmRSS from /proc.
func rssKiB(pid int) int { return statusKiB(pid, "VmRSS") }

// peakRSSKiB reads VmHWM, the highest RSS the process has had, from /proc.
func peakRSSKiB(pid int) int { return statusKiB(pid, "VmHWM") }

func statusKiB(pid int, field string) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return 0
}

// cpuTicks is utime+stime of a process in clock ticks (USER_HZ, 100 on Linux).
func cpuTicks(pid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		f := strings.Fields(s[i+2:])
		if len(f) > 12 {
			u, _ := strconv.Atoi(f[11])
			k, _ := strconv.Atoi(f[12])
			return u + k
		}
	}
	return 0
}

// Stats are the figures of one series of durations, in milliseconds.
type Stats struct {
	N      int     `json:"n"`
	Median float64 `json:"median_ms"`
	P90    float64 `json:"p90_ms"`
	Max    float64 `json:"max_ms"`
}

func stats(d []time.Duration) Stats {
	if len(d) == 0 {
		return Stats{}
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	ms := func(x time.Duration) float64 { return math.Round(float64(x)/1e4) / 100 }
	return Stats{N: len(s), Median: ms(s[len(s)/2]), P90: ms(s[(len(s)*9)/10]), Max: ms(s[len(s)-1])}
}

// Spread is how a ratio of medians varied over the rounds of one run: each round a run of
// consecutive changes, its ratio its median over the floor's median in the same changes.
type Spread struct {
	Rounds int     `json:"rounds"`
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
}

// roundSpread splits d and floor, measured change by change in turn, into rounds of size
// changes (a shorter last round is dropped: its median would weigh as much on fewer changes)
// and returns the spread of the rounds' ratios. The zero Spread when there is no full round.
func roundSpread(d, floor []time.Duration, size int) Spread {
	n := min(len(d), len(floor))
	var ratios []float64
	for start := 0; size > 0 && start+size <= n; start += size {
		f := median(floor[start : start+size])
		if f == 0 {
			continue
		}
		ratios = append(ratios, float64(median(d[start:start+size]))/float64(f))
	}
	if len(ratios) == 0 {
		return Spread{}
	}
	sort.Float64s(ratios)
	r2 := func(x float64) float64 { return math.Round(x*100) / 100 }
	return Spread{Rounds: len(ratios), Min: r2(ratios[0]), Median: r2(ratios[len(ratios)/2]), Max: r2(ratios[len(ratios)-1])}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func waitFor(ctx context.Context, timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Microsecond):
		}
	}
	return nil
}

// parallel runs f(0..n-1) on 8 goroutines and returns the first error.
func parallel(n int, f func(i int) error) error { return parallelN(8, n, f) }

// parallelN runs f for 0..n-1 on workers goroutines and returns the first error.
func parallelN(workers, n int, f func(i int) error) error {
	errs := make(chan error, n)
	next := make(chan int)
	for range workers {
		go func() {
			for i := range next {
				errs <- f(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}
