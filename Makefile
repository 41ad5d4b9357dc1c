GO ?= go
BIN := bin/kelp

.PHONY: build image test unit proto bench bench-compare vet deps clean helm-test

# build: one static binary (no cgo), the same that deploy/Dockerfile wraps.
build:
	CGO_ENABLED=0 $(GO) build -o $(BIN) ./cmd/kelp

image: build
	cp $(BIN) deploy/kelp && docker build -t kelp deploy

# test: everything CI runs. Installs what the tests need on a fresh machine first.
# The internal packages (servers, clients, stores: goroutines everywhere) run
# under the race detector; the black-box tests drive the built binary from
# outside, where -race would only slow the test process, so they run without.
test: deps vet build
	$(GO) test -count=1 -race -timeout 15m ./internal/...
	$(GO) test -count=1 -timeout 15m ./cmd/... ./test/...
	$(MAKE) helm-test

# helm-test: renders deploy/helm/kelp with Helm's library and checks the
# manifests. A module of its own (test/helm/go.mod): Helm's dependencies stay
# out of Kelp's go.mod.
helm-test:
	cd test/helm && $(GO) vet ./... && $(GO) test -count=1 -timeout 5m ./...

unit:
	$(GO) test -count=1 -short ./internal/...

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$'))" || (gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$'); echo "gofmt needed"; exit 1)
	$(GO) vet ./...

# deps: system packages and services the tests use (idempotent).
deps:
	@./scripts/test-deps.sh

proto:
	cd internal/pb && protoc --go_out=. --go_opt=paths=source_relative \
		--go-grpc_out=. --go-grpc_opt=paths=source_relative *.proto
	cd internal/pb && for p in *.proto; do f=$${p%.proto}; mkdir -p $${f}pb && mv $${f}.pb.go $${f}_grpc.pb.go $${f}pb/; done

bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./internal/...

# bench-compare: the issue-16 workloads side by side with the disk and loopback
# limits, one table (docs/benchmark.md#side-by-side). SCALE=0.1 for a quick run.
bench-compare:
	SCALE=$${SCALE:-1} ./scripts/bench-compare.sh

clean:
	rm -rf bin
