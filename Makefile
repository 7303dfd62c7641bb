GO ?= go
PROTOC_GEN_GO_VERSION := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.5.1
# staticcheck v0.8.2 is its release 2026.2.2, which knows Go 1.26.
STATICCHECK_VERSION := v0.8.2
GOBIN := $(shell $(GO) env GOPATH)/bin
PROTOS := $(shell find api/proto -name '*.proto')

.PHONY: all build run test test-short fuzz bites lint vet fmt fmt-check staticcheck staticcheck-tool proto proto-tools bench docker clean

all: build

build:
	$(GO) build -o bin/kvd ./cmd/kvd
	$(GO) build -o bin/kvctl ./cmd/kvctl

## run: a single-node site named "local", data in ./data/local, client API on 127.0.0.1:7379.
run: build
	./bin/kvd --data-dir data/local

## test: lint (vet, gofmt, staticcheck), the race-enabled test suite (with the
## internal/lint rules and goleak checks) and a short run of every fuzz target.
test: lint
	$(GO) test -race -timeout 30m ./...
	$(MAKE) fuzz

## fuzz: runs every Fuzz target of the module for FUZZTIME each (scripts/fuzz.sh).
FUZZTIME ?= 3s
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) scripts/fuzz.sh

## lint: go vet, gofmt and staticcheck. The project's own rules (internal/lint)
## run with the tests: go test ./internal/lint.
lint: vet fmt-check staticcheck

## bites: turns off each safety guard in turn (causeway_guards build tag) and checks that its tests fail.
bites:
	GO=$(GO) scripts/bites.sh

vet:
	$(GO) vet ./...

## fmt: gofmt every Go file; fmt-check fails if one needs it.
fmt:
	gofmt -w $$(git ls-files -co --exclude-standard '*.go')

fmt-check:
	@test -z "$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go'))" || (gofmt -l $$(git ls-files -co --exclude-standard '*.go'); echo "gofmt: files above need formatting"; exit 1)

## staticcheck: staticcheck $(STATICCHECK_VERSION) over the module (installed first if missing).
staticcheck: staticcheck-tool
	$(GOBIN)/staticcheck ./...

## staticcheck-tool: installs staticcheck $(STATICCHECK_VERSION) into $(GOBIN) unless it is there.
staticcheck-tool:
	@$(GOBIN)/staticcheck -version 2>/dev/null | grep -qF '($(STATICCHECK_VERSION:v%=%))' || \
	  (echo "installing staticcheck $(STATICCHECK_VERSION)"; GOBIN=$(GOBIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION))

proto-tools:
	@command -v protoc >/dev/null || (echo "protoc not found: apt-get install protobuf-compiler" && exit 1)
	GOBIN=$(GOBIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	GOBIN=$(GOBIN) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)

## proto: regenerate the committed Go code from api/proto.
proto: proto-tools
	PATH=$(GOBIN):$$PATH protoc -I api/proto \
	  --go_out=api/proto --go_opt=paths=source_relative \
	  --go-grpc_out=api/proto --go-grpc_opt=paths=source_relative \
	  $(PROTOS:api/proto/%=%)

.PHONY: cluster cluster-down geo geo-down dashboards image docker compose-up compose-down e2e

## geo: three sites s1, s2, s3 on loopback (client ports 7379, 8379, 9379) with simulated WAN delay; GEO_NODES=3 for three nodes per site, GEO_WAN to change the delay. Data in ./data/geo.
geo:
	scripts/geo.sh up

## geo-down: stops the nodes started by make geo.
geo-down:
	scripts/geo.sh down

## dashboards: checks every query of the Grafana dashboards (deploy/grafana/dashboards) against a real Prometheus scraping three loaded sites on loopback (installs Debian's prometheus if missing); draws the geo dashboard's key panels into docs/img.
dashboards:
	scripts/dashboards.sh


## cluster: a three-node site "local" on loopback (client ports 7379, 7389, 7399), data in ./data/cluster.
cluster:
	scripts/cluster.sh up

## cluster-down: stops the nodes started by make cluster.
cluster-down:
	scripts/cluster.sh down

bench:
	$(GO) run ./bench/cmd/kvbench --data-dir-parent . --out bench/results/single-node.md

.PHONY: bench-compare bench-geo bench-shards bench-profile etcd-embed

## bench-compare: YCSB A, B, C, F on a local 3-member etcd 3.7.3 cluster (bin/etcd-embed) and a 3-node Causeway site, 3 rounds alternating the systems, medians and ranges over the rounds (about 20-25 minutes); results in bench/results/compare-3node.* (COMPARE_ETCD34=1 adds Debian's etcd 3.4)
bench-compare:
	bench/compare.sh

## bench-shards: idle CPU, memory and YCSB-B of a 3-node site with 16, 256 and 1,024 shards per node (about 20 minutes); results in bench/results/shards.md
bench-shards:
	bench/shards.sh

## bench-profile: CPU profiles of one node of a 3-node site idle, under YCSB-A (64 and 1 client) and YCSB-C (1 client), with a table of where the CPU goes (about 3 minutes); results in bench/results/profiles/
bench-profile:
	bench/profile.sh

## bench-geo: three sites at 50 ms one way (GEO_COMPARE_DELAY): Causeway (make geo's simulated WAN) against a 3-member etcd stretched over the sites (bench/delayproxy on its peer links); put latency, YCSB-B and remote visibility per site; results in bench/results/geo-compare.{md,png} (~5 min)
bench-geo:
	bench/geo-compare.sh

## etcd-embed: bin/etcd-embed, one etcd 3.7.3 member (bench/etcd, its own Go module) for the benchmarks.
etcd-embed:
	cd bench/etcd && $(GO) build -o ../../bin/etcd-embed .

## image: static linux binaries and the FROM-scratch image causeway/kvd:dev (no registry needed).
# Both binaries in one go build, without -trimpath: that flag is part of
# every package's build-cache key, so with it the image shared no compiled
# package with make build and go test (412 packages compiled after make
# build, against 103, those that CGO_ENABLED=0 changes).
image:
	mkdir -p bin/linux
	CGO_ENABLED=0 GOOS=linux $(GO) build -ldflags="-s -w" -o bin/linux/ ./cmd/kvd ./cmd/kvctl
	docker build -f deploy/Dockerfile -t causeway/kvd:dev .

docker: image

## compose-up: three sites of three nodes (deploy/docker-compose.yml) with simulated WAN delay (deploy/wan.env); waits until all 9 are healthy.
compose-up:
	scripts/compose.sh up

## e2e: builds the image, starts the compose cluster and runs the end-to-end test (kills a node, cuts a site off, checks convergence and causal+); tears down even on failure.
e2e:
	scripts/e2e.sh

## compose-down: stops the compose cluster and deletes its volumes.
compose-down:
	scripts/compose.sh down

clean:
	rm -rf bin
