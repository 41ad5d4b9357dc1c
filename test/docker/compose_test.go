package docker

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/testutil"
)

// cluster is one project of the shipped deploy/docker-compose.yml, with its
// own image, host ports and volumes, removed when the test ends.
type cluster struct {
	t       *testing.T
	compose []string // "docker compose" (v2) or "docker-compose" (v1)
	project string
	file    string
	env     []string
	bin     string            // the kelp binary the image wraps, for host-side clients
	port    map[string]string // published host port by service ("s3" for the gateway)
	ids     map[string]string // container id by service
	net     string            // the cluster network
}

// composeCommand finds Compose: the v2 plugin first, else v1. Without it, or
// without a Docker engine, the test fails unless KELP_TEST_ALLOW_SKIP=1
// (testutil.SkipOrFail): a CI machine must not pass by skipping.
func composeCommand(t *testing.T) []string {
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		testutil.SkipOrFail(t, "no usable Docker engine (docker info: %v: %s)", err, strings.TrimSpace(string(out)))
	}
	if exec.Command("docker", "compose", "version").Run() == nil {
		return []string{"docker", "compose"}
	}
	if exec.Command("docker-compose", "version").Run() == nil {
		return []string{"docker-compose"}
	}
	testutil.SkipOrFail(t, "neither `docker compose` nor `docker-compose` works")
	return nil
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// hostPorts returns n distinct free ports on 127.0.0.1 (below the kernel's
// ephemeral range, see testutil.FreePort). They are picked before the
// containers start and published by Docker afterwards, because a volume
// server advertises its public URL, port included, from the start.
func hostPorts(t *testing.T, n int) []string {
	var ports []string
	for _, p := range testutil.FreePorts(t, n) {
		ports = append(ports, strconv.Itoa(p))
	}
	return ports
}

// startCluster builds a static kelp, an image from deploy/Dockerfile around
// it, and brings deploy/docker-compose.yml up under a project of its own.
func startCluster(t *testing.T) *cluster {
	compose := composeCommand(t)
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(here), "..", "..")
	dir := t.TempDir()
	start := time.Now()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "kelp"), "./cmd/kelp")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("static build: %v\n%s", err, out)
	}
	dockerfile, err := os.ReadFile(filepath.Join(root, "deploy", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "Dockerfile"), dockerfile, 0o644)
	project := fmt.Sprintf("kelpdt%d", os.Getpid())
	image := project + ":test"
	run(t, "docker", "build", "-q", "-t", image, dir)
	t.Cleanup(func() { exec.Command("docker", "rmi", "-f", image).Run() })
	t.Logf("binary and image built in %v", time.Since(start).Round(time.Millisecond))

	services := []string{"m1", "m2", "m3", "v1", "v2", "v3", "v4", "filer", "s3"}
	c := &cluster{
		t: t, compose: compose, project: project, bin: filepath.Join(dir, "kelp"),
		file: filepath.Join(root, "deploy", "docker-compose.yml"),
		port: map[string]string{}, ids: map[string]string{},
	}
	c.env = append(os.Environ(), "KELP_IMAGE="+image, "KELP_PUBLIC_HOST=127.0.0.1",
		"KELP_ACCESS_KEY="+accessKey, "KELP_SECRET_KEY="+secretKey)
	for i, p := range hostPorts(t, len(services)) {
		c.port[services[i]] = p
		c.env = append(c.env, "KELP_"+strings.ToUpper(services[i])+"_PORT="+p)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cluster logs:\n%s", c.composeOutput("logs", "--tail=40"))
		}
		c.composeOutput("down", "-v", "-t", "1", "--remove-orphans")
	})
	start = time.Now()
	c.composeRun("up", "-d")
	for _, s := range services[:8] {
		c.ids[s] = c.composeRun("ps", "-q", s)
		if c.ids[s] == "" {
			t.Fatalf("no container for service %s", s)
		}
	}
	c.net = run(t, "docker", "inspect", "-f", "{{range $name, $_ := .NetworkSettings.Networks}}{{$name}}{{end}}", c.ids["v1"])
	t.Logf("%s up (%s, network %s) in %v", strings.Join(compose, " "), project, c.net, time.Since(start).Round(time.Millisecond))
	return c
}

func (c *cluster) composeCmd(args ...string) *exec.Cmd {
	all := append(append(append([]string{}, c.compose[1:]...), "-p", c.project, "-f", c.file), args...)
	cmd := exec.Command(c.compose[0], all...)
	cmd.Env = c.env
	return cmd
}

func (c *cluster) composeOutput(args ...string) string {
	out, _ := c.composeCmd(args...).CombinedOutput()
	return string(out)
}

// composeRun runs a compose command and returns its standard output.
func (c *cluster) composeRun(args ...string) string {
	c.t.Helper()
	cmd := c.composeCmd(args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		c.t.Fatalf("%s %s: %v\n%s%s", strings.Join(c.compose, " "), strings.Join(args, " "), err, out, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// url is a service's HTTP base URL as seen from the host.
func (c *cluster) url(service string) string { return "http://127.0.0.1:" + c.port[service] }

// ipOf is a container's address on the cluster network ("" when cut off).
func (c *cluster) ipOf(service string) string {
	return run(c.t, "docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", c.ids[service])
}

// cut disconnects services from the cluster network: a real network cut
// (their names stop resolving, packets to their old addresses go nowhere),
// as when a data center's link fails.
func (c *cluster) cut(services ...string) {
	for _, s := range services {
		run(c.t, "docker", "network", "disconnect", "-f", c.net, c.ids[s])
	}
}

// reconnect joins services back under their names, each on an address it
// did not have before: Docker hands out the lowest free address, so the
// services are joined highest old address first and take each other's.
// A server that bound its old address (or a peer that cached it) is then
// unreachable, or worse, reaches the wrong server.
func (c *cluster) reconnect(old map[string]string, services ...string) {
	c.t.Helper()
	order := slices.Clone(services)
	slices.SortFunc(order, func(a, b string) int {
		return -bytes.Compare(net.ParseIP(old[a]).To16(), net.ParseIP(old[b]).To16())
	})
	c.rejoin(order...)
	for _, s := range services {
		if ip := c.ipOf(s); ip == old[s] || ip == "" {
			c.t.Fatalf("%s came back on %q, was %s: the test needs a new address", s, ip, old[s])
		}
	}
}

// rejoin connects services back to the cluster network under their names,
// on whatever address Docker hands out.
func (c *cluster) rejoin(services ...string) {
	c.t.Helper()
	for _, s := range services {
		run(c.t, "docker", "network", "connect", "--alias", s, c.net, c.ids[s])
	}
}

// healthy checks that every container's healthcheck (`kelp health`) passes.
func (c *cluster) healthy() error {
	for s, id := range c.ids {
		out, err := exec.Command("docker", "inspect", "-f", "{{.State.Health.Status}}", id).CombinedOutput()
		if st := strings.TrimSpace(string(out)); err != nil || st != "healthy" {
			return fmt.Errorf("%s: health %q %v", s, st, err)
		}
	}
	return nil
}

// exec runs a kelp command inside a service's container (the image has no
// shell: the command is /kelp itself).
func (c *cluster) exec(service string, args ...string) (string, error) {
	out, err := c.composeCmd(append([]string{"exec", "-T", service, "/kelp"}, args...)...).CombinedOutput()
	return string(out), err
}
