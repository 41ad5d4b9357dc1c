// Package arch checks DESIGN.md's import rules: imports flow one way, and the
// core packages never see wire types (pb, net/http, gRPC).
package arch

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/kelpfs/kelp/"

// core packages: deterministic or disk-only, no network types.
var core = []string{
	"internal/consensus", "internal/topology", "internal/store", "internal/volume", "internal/erasure",
	"internal/needle", "internal/chunk", "internal/filer", "internal/fid", "internal/vfs",
	"internal/replication", "internal/ttl", "internal/varenc", "internal/sse", "internal/kms", "internal/crcmath",
	"internal/aesgcm",
}

// wire imports that core packages must not use directly.
var wire = []string{"net/http", "google.golang.org/grpc", module + "internal/pb"}

type pkg struct {
	ImportPath string
	Imports    []string
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", "../../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func isCore(path string) bool {
	rel := strings.TrimPrefix(path, module)
	for _, c := range core {
		if rel == c || strings.HasPrefix(rel, c+"/") {
			return true
		}
	}
	return false
}

// TestCoreHasNoWireTypes checks direct imports only: a library such as raft may
// pull net/http in for itself, which is not Kelp code seeing wire types.
func TestCoreHasNoWireTypes(t *testing.T) {
	for _, p := range listPackages(t) {
		if !isCore(p.ImportPath) {
			continue
		}
		for _, imp := range p.Imports {
			for _, w := range wire {
				if imp == w || strings.HasPrefix(imp, w+"/") {
					t.Errorf("%s imports %s: core packages must not see wire types", p.ImportPath, imp)
				}
			}
		}
	}
}

// TestOnlyCLIImportsCLI keeps internal/cli at the top of the graph.
func TestOnlyCLIImportsCLI(t *testing.T) {
	for _, p := range listPackages(t) {
		for _, imp := range p.Imports {
			if imp == module+"internal/cli" && p.ImportPath != module+"cmd/kelp" {
				t.Errorf("%s imports internal/cli; only cmd/kelp may", p.ImportPath)
			}
		}
	}
}

// TestCoreDoesNotImportServices keeps the layers one-way.
func TestCoreDoesNotImportServices(t *testing.T) {
	services := []string{"internal/master", "internal/volumeserver", "internal/filerserver", "internal/s3",
		"internal/webdav", "internal/fuse", "internal/shell", "internal/adminui", "internal/client",
		"internal/objectapi", "internal/fsview", "internal/testcluster"}
	for _, p := range listPackages(t) {
		if !isCore(p.ImportPath) {
			continue
		}
		for _, imp := range p.Imports {
			for _, s := range services {
				if imp == module+s || strings.HasPrefix(imp, module+s+"/") {
					t.Errorf("%s (core) imports %s (a layer above it)", p.ImportPath, imp)
				}
			}
		}
	}
}
