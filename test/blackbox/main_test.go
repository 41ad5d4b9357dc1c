// Package blackbox drives the built kelp binary the way a user does: start it
// with the documented commands, talk to it over its public HTTP API, kill it.
package blackbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"
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

// freePortPair returns a port p such that p, its gRPC port p+10000 and a
// master's Raft port (p+20000, or p-20000 above 45535) are free on 127.0.0.1.
func freePortPair(t *testing.T) int {
	t.Helper()
	free := func(port int) bool {
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			ln.Close()
		}
		return err == nil
	}
	for i := 0; i < 100; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		raft := p + 20000
		if raft > 65535 {
			raft = p - 20000
		}
		if p+10000 <= 65535 && free(p+10000) && free(raft) {
			return p
		}
	}
	t.Fatal("no free port pair")
	return 0
}

func waitHealthy(t *testing.T, hostport string, p *process) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + hostport + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s never became healthy; log:\n%s", hostport, p.log.String())
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
