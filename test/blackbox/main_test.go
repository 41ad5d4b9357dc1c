// Package blackbox drives the built kelp binary the way a user does: start it
// with the documented commands, talk to it over its public HTTP API, kill it.
package blackbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/pb"
	"github.com/kelpfs/kelp/internal/testutil"
)

// kelpBin is the binary under test, built once per test binary run.
var kelpBin string

func TestMain(m *testing.M) {
	code := func() int {
		if bin := os.Getenv("KELP_BIN"); bin != "" {
			kelpBin = bin
			return m.Run()
		}
		dir, err := os.MkdirTemp("", "kelp-blackbox")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		kelpBin = filepath.Join(dir, "kelp")
		_, here, _, _ := runtime.Caller(0)
		build := exec.Command("go", "build", "-o", kelpBin, "./cmd/kelp")
		build.Dir = filepath.Join(filepath.Dir(here), "..", "..")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building kelp:", err)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

// process is a started kelp command.
type process struct {
	cmd *exec.Cmd
	log *bytes.Buffer
}

func startKelp(t *testing.T, args ...string) *process {
	t.Helper()
	cmd := exec.Command(kelpBin, args...)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, log: &log}
	t.Cleanup(func() { p.kill() })
	return p
}

// kill ends the process with SIGKILL, like a crash.
func (p *process) kill() {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Kill()
		p.cmd.Wait()
	}
}

// serverPorts are the ports of one `kelp server`: the master's, the volume
// server's and the filer's (each with its gRPC port +10000, the master's raft
// port +20000) and the S3 gateway's.
type serverPorts struct{ master, volume, filer, s3 int }

func freshPorts(t *testing.T) serverPorts {
	p := testutil.FreePorts(t, 4, pb.GRPCPortOffset, pb.RaftPortOffset)
	return serverPorts{p[0], p[1], p[2], p[3]}
}

func (sp serverPorts) args() []string {
	return []string{"--master.port=" + strconv.Itoa(sp.master), "--volume.port=" + strconv.Itoa(sp.volume),
		"--filer.port=" + strconv.Itoa(sp.filer), "--s3.port=" + strconv.Itoa(sp.s3),
		"--webdav.port=0"} // WebDAV has its own test; a fixed port would collide
}

func hostport(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// startServer starts `kelp server --dir=dir` with extra arguments on *ports
// (fresh ones when zero) and waits until its master, volume server and S3
// gateway answer. Ports are picked free and bound by the process a moment
// later, so another test may take one in between: when the process ends
// saying so, it is started again on fresh ports, written back to *ports.
func startServer(t *testing.T, dir string, ports *serverPorts, extra ...string) *process {
	t.Helper()
	if *ports == (serverPorts{}) {
		*ports = freshPorts(t)
	}
	for attempt := 0; ; attempt++ {
		args := append([]string{"server", "--dir=" + dir, "--ip=127.0.0.1"}, ports.args()...)
		p := startKelp(t, append(args, extra...)...)
		err := waitServing(p, *ports)
		if err == nil {
			return p
		}
		p.kill()
		if attempt < 5 && testutil.AddrInUse(errors.New(p.log.String())) {
			t.Logf("a port was taken (%v); starting again on fresh ports", err)
			*ports = freshPorts(t)
			continue
		}
		t.Fatalf("kelp server: %v; log:\n%s", err, p.log.String())
	}
}

// waitServing waits until the master and volume server are healthy and the
// S3 gateway answers, or the process has ended.
func waitServing(p *process, ports serverPorts) error {
	deadline := time.Now().Add(60 * time.Second)
	urls := []string{"http://" + hostport(ports.master) + "/healthz", "http://" + hostport(ports.volume) + "/healthz",
		"http://" + hostport(ports.s3) + "/healthz"}
	for _, u := range urls {
		for !answers(u) {
			if exited(p) {
				return fmt.Errorf("exited before %s answered", u)
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s never answered", u)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

func answers(url string) bool {
	resp, err := http.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

type assignment struct {
	FID   string `json:"fid"`
	URL   string `json:"url"`
	Error string `json:"error"`
}

func assign(ctx context.Context, master string) (assignment, error) {
	var a assignment
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+master+"/dir/assign", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return a, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		return a, err
	}
	if resp.StatusCode != 200 {
		return a, fmt.Errorf("assign: %s: %s", resp.Status, a.Error)
	}
	return a, nil
}

func put(ctx context.Context, url string, body []byte) (int, error) {
	req, _ := http.NewRequestWithContext(ctx, "PUT", url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func get(url string) (int, []byte, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}
