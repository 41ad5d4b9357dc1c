// Package docker runs Kelp's image as a multi-host cluster under docker-compose
// and cuts real networks: a whole data center is disconnected, the leading
// master is killed, and no acknowledged byte may be lost.
//
// It needs a Docker engine and docker-compose; without them the test skips
// (set KELP_TEST_REQUIRE_DOCKER=1 to make that a failure).
package docker

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

const composeFile = `version: "2.4"
x-master: &master
  image: %[1]s
  networks: [kelp]
x-volume: &volume
  image: %[1]s
  networks: [kelp]
  depends_on: [m1, m2, m3]
services:
  m1:
    <<: *master
    command: ["master", "--ip=m1", "--port=9333", "--mdir=/data", "--peers=m1:9333,m2:9333,m3:9333"]
  m2:
    <<: *master
    command: ["master", "--ip=m2", "--port=9333", "--mdir=/data", "--peers=m1:9333,m2:9333,m3:9333"]
  m3:
    <<: *master
    command: ["master", "--ip=m3", "--port=9333", "--mdir=/data", "--peers=m1:9333,m2:9333,m3:9333"]
  v1:
    <<: *volume
    command: ["volume", "--ip=v1", "--port=8080", "--dir=/data", "--max=20", "--master=m1:9333,m2:9333,m3:9333", "--data-center=dc1", "--rack=r1"]
  v2:
    <<: *volume
    command: ["volume", "--ip=v2", "--port=8080", "--dir=/data", "--max=20", "--master=m1:9333,m2:9333,m3:9333", "--data-center=dc1", "--rack=r2"]
  v3:
    <<: *volume
    command: ["volume", "--ip=v3", "--port=8080", "--dir=/data", "--max=20", "--master=m1:9333,m2:9333,m3:9333", "--data-center=dc2", "--rack=r1"]
  v4:
    <<: *volume
    command: ["volume", "--ip=v4", "--port=8080", "--dir=/data", "--max=20", "--master=m1:9333,m2:9333,m3:9333", "--data-center=dc2", "--rack=r2"]
  filer:
    <<: *volume
    command: ["filer", "--ip=filer", "--port=8888", "--dir=/data", "--replication=100", "--master=m1:9333,m2:9333,m3:9333"]
networks:
  kelp: {}
`

// cluster is one docker-compose project.
type cluster struct {
	t       *testing.T
	project string
	file    string
}

func requireDocker(t *testing.T) {
	for _, cmd := range [][]string{{"docker", "info"}, {"docker-compose", "version"}} {
		if err := exec.Command(cmd[0], cmd[1:]...).Run(); err != nil {
			if os.Getenv("KELP_TEST_REQUIRE_DOCKER") == "1" {
				t.Fatalf("%s: %v", strings.Join(cmd, " "), err)
			}
			t.Skipf("no usable %s (%v); set KELP_TEST_REQUIRE_DOCKER=1 to fail instead", cmd[0], err)
		}
	}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// startCluster builds a static kelp, an image around it, and brings the
// compose project up; everything is removed when the test ends.
func startCluster(t *testing.T) *cluster {
	dir := t.TempDir()
	_, here, _, _ := runtime.Caller(0)
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "kelp"), "./cmd/kelp")
	build.Dir = filepath.Join(filepath.Dir(here), "..", "..")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("static build: %v\n%s", err, out)
	}
	os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\nCOPY kelp /kelp\nENTRYPOINT [\"/kelp\"]\n"), 0o644)
	project := fmt.Sprintf("kelpft%d", os.Getpid())
	image := project + ":test"
	run(t, "docker", "build", "-q", "-t", image, dir)
	t.Cleanup(func() { exec.Command("docker", "rmi", "-f", image).Run() })
	c := &cluster{t: t, project: project, file: filepath.Join(dir, "docker-compose.yml")}
	os.WriteFile(c.file, []byte(fmt.Sprintf(composeFile, image)), 0o644)
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := exec.Command("docker-compose", "-p", project, "-f", c.file, "logs", "--tail=30").CombinedOutput()
			t.Logf("cluster logs:\n%s", out)
		}
		exec.Command("docker-compose", "-p", project, "-f", c.file, "down", "-v", "-t", "1").Run()
	})
	run(t, "docker-compose", "-p", project, "-f", c.file, "up", "-d")
	return c
}

func (c *cluster) container(service string) string { return c.project + "_" + service + "_1" }

// ip is a service's address on the cluster network, reachable from the host.
func (c *cluster) ip(service string) string {
	return run(c.t, "docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", c.container(service))
}

// cutOff freezes a service: its connections stay open but nothing answers,
// as behind a cut network. (docker network disconnect would do as well, but
// Docker's embedded DNS does not come back after a reconnect.)
func (c *cluster) cutOff(service string) { run(c.t, "docker", "pause", c.container(service)) }

func (c *cluster) restore(service string) { run(c.t, "docker", "unpause", c.container(service)) }

// eventually retries f until it succeeds or d passes.
func eventually(t *testing.T, d time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("%s: still failing after %v: %v", what, d, err)
}

var httpc = &http.Client{Timeout: 90 * time.Second}

func put(url string, body []byte) error {
	req, _ := http.NewRequest(http.MethodPut, url, bytes.NewReader(body))
	resp, err := httpc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return fmt.Errorf("PUT %s: %s: %s", url, resp.Status, msg)
	}
	return nil
}

func get(url string) ([]byte, error) {
	resp, err := httpc.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	return b, err
}

func TestDataCenterLossAndLeaderLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an image and runs 8 containers")
	}
	requireDocker(t)
	c := startCluster(t)
	filer := "http://" + c.ip("filer") + ":8888"
	master := "http://" + c.ip("m1") + ":9333"
	eventually(t, 60*time.Second, "four volume servers registered", func() error {
		var st struct {
			VolumeServers []json.RawMessage `json:"volumeServers"`
		}
		b, err := get(master + "/cluster/status")
		if err == nil {
			err = json.Unmarshal(b, &st)
		}
		if err == nil && len(st.VolumeServers) != 4 {
			err = fmt.Errorf("%d volume servers", len(st.VolumeServers))
		}
		return err
	})

	// Files written under replication 100: one copy in each data center.
	files := map[string][]byte{}
	for i := 0; i < 40; i++ {
		body := make([]byte, 1+i*3001)
		rand.Read(body)
		path := fmt.Sprintf("/before/f%02d", i)
		eventually(t, 20*time.Second, "write "+path, func() error { return put(filer+path, body) })
		files[path] = body
	}

	// Lose data center 2: every acknowledged file stays readable, and a write
	// that needs dc2 fails with an error instead of hanging.
	c.cutOff("v3")
	c.cutOff("v4")
	for path, want := range files {
		var got []byte
		eventually(t, 30*time.Second, "read "+path+" without dc2", func() (err error) {
			got, err = get(filer + path)
			return err
		})
		if !bytes.Equal(got, want) {
			t.Fatalf("%s differs after losing dc2", path)
		}
	}
	start := time.Now()
	err := put(filer+"/during/x", []byte("needs two data centers"))
	if err == nil {
		t.Fatal("a write under replication 100 succeeded with one data center")
	}
	// The master either no longer counts dc2 ("needs 2 data centers") or
	// still does and fails to reach it ("allocate on v3:8080: ..."): either
	// way a 503 that names the cause.
	if msg := err.Error(); !strings.Contains(msg, "503") ||
		!(strings.Contains(msg, "data centers") || strings.Contains(msg, "v3:8080") || strings.Contains(msg, "v4:8080")) {
		t.Errorf("the refusal is not a 503 naming what is missing: %v", err)
	}
	t.Logf("write without dc2 refused after %v: %v", time.Since(start).Round(time.Millisecond), err)

	// dc2 comes back: writes succeed again.
	c.restore("v3")
	c.restore("v4")
	eventually(t, 60*time.Second, "write after dc2 returned", func() error { return put(filer+"/after/x", []byte("back")) })

	// Kill the leading master: writes go on through the new leader.
	var st struct {
		Leader string `json:"leader"`
	}
	b, err := get(master + "/cluster/status")
	if err != nil || json.Unmarshal(b, &st) != nil || st.Leader == "" {
		t.Fatalf("cluster status: %s %v", b, err)
	}
	leader := strings.Split(st.Leader, ":")[0]
	run(t, "docker", "kill", c.container(leader))
	killed := time.Now()
	eventually(t, 30*time.Second, "write after leader "+leader+" died", func() error {
		return put(filer+"/after/leader-loss", []byte("still here"))
	})
	t.Logf("first write after killing leader %s succeeded after %v", leader, time.Since(killed).Round(time.Millisecond))
	for path, want := range files {
		if got, err := get(filer + path); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s after leader loss: %v", path, err)
		}
	}
}
