# Causeway build entry points. `make lab` and `make test` work on a fresh
# machine: scripts/preflight.sh checks for root (make test without it runs the
# tests that need none), installs what is missing, loads br_netfilter and
# refuses make test while the test cluster runs.
SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)
GO ?= go
BIN := $(CURDIR)/bin
TOOLBIN := $(CURDIR)/.bin
MODULE := github.com/causeway-net/causeway
BINARIES := $(notdir $(wildcard cmd/*))
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
PROTOS := api/nsp/v1/model.proto api/nsp/v1/configurationmanager.proto api/ipam/v1/ipam.proto
# -race for every package; the e2e suite fits well within the timeout.
# go test's -p bounds compiles, links and test binaries together, and the
# longest tests (the end-to-end suite, the lab's scenarios) mostly wait on
# timers and the kernel: with -p at the core count they held both slots
# while the cores idled and every other package's compile queued behind
# them. -p 4 lets two compile while two wait (on two cores, make test
# with the cache warm: 13.8 minutes, the end-to-end suite's own length).
TESTFLAGS ?= -race -count=1 -timeout 25m -p 4
# The Helm chart's test is a module of its own (Helm's and Kubernetes'
# dependencies stay out of the binaries); it renders templates in one
# goroutine, so it skips -race and its long instrumented build.
HELMTEST := deployments/helmtest
HELMTESTFLAGS ?= -count=1 -timeout 10m
# Everything built without -race (the binaries, go vet, the binaries the
# tests build through internal/testutil, the chart's and the cluster's
# suites) is built one way, static and path-trimmed, so that each package
# compiles once for all of them (on a fresh machine each other way
# compiled the whole dependency tree again). The tag grpcnotrace keeps
# gRPC from linking golang.org/x/net/trace, whose HTML templates call
# methods by name: with them the linker keeps every exported method of every
# type that is ever an interface value (docs/proxy-memory.md).
NORACE := CGO_ENABLED=0 GOFLAGS="$(strip $(GOFLAGS) -trimpath -tags=grpcnotrace)"

.PHONY: all build images images-full test test-stress test-apiserver test-short generate lint bench figures lab clean tools deps cluster cluster-down test-kube preflight-test preflight-lab

all: lint build test

# Static binaries: the images are FROM scratch and take them as they are.
build:
	@mkdir -p $(BIN)
	$(NORACE) $(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN)/ $(addprefix ./cmd/,$(BINARIES))

# The runtime images (proxy, ipam, nsp) from the root Dockerfile, built
# offline with buildah from the binaries of `make build` (as root).
IMAGE_REPO ?= localhost/causeway
IMAGE_TAG ?= $(VERSION)
images: preflight-images build
	IMAGE_REPO=$(IMAGE_REPO) ./scripts/build-images.sh $(BIN) $(IMAGE_TAG)

# The same images through the Dockerfile's whole path, its compile stage
# included, offline (as root): the stage's golang base image is replaced by
# a local stand-in built from /usr/local/go and Debian's busybox-static, the
# modules come from GOPROXY. Not part of `make test` or CI (minutes, network).
images-full: preflight-images
	IMAGE_REPO=$(IMAGE_REPO) ./scripts/build-images-full.sh $(IMAGE_TAG)

# The README's test command. Kernel tests need root and skip without it; with
# CAUSEWAY_REQUIRE_ROOT set, make test refuses to start unprivileged.
# The longest packages are named first, so that go test starts them first:
# the end-to-end suite (about 12 minutes, mostly waiting) then runs beside
# all the others instead of alone after them (go test runs one package per
# core and starts them in the order given; a package named twice runs once).
SLOW_PKGS := ./test/e2e ./cmd/proxy ./pkg/nexthopcheck ./pkg/lab/labrun ./cmd/ipam ./test/images
test: preflight-test build
	$(GO) test $(TESTFLAGS) $(SLOW_PKGS) ./...
	cd $(HELMTEST) && $(NORACE) $(GO) test $(HELMTESTFLAGS) ./...

# make test with every core kept busy by other work (one busy loop per
# core, STRESS_LOOPS to change it, at normal priority, stopped when it ends
# even on failure): no test may depend on an idle machine.
test-stress:
	MAKE="$(MAKE)" ./scripts/test-stress.sh

# The tests against a real Kubernetes API server (build tag apiserver):
# internal/apiservertest runs Debian's etcd and the kube-apiserver that the
# test cluster's build leaves in /var/cache/causeway (or
# CAUSEWAY_KUBE_APISERVER). Not part of `make test`, which runs before that
# build is done in CI; CI runs this target after it, with
# CAUSEWAY_REQUIRE_ROOT set, so that a missing binary fails instead of
# skipping. The packages' other tests run in both.
APISERVER_PKGS := ./pkg/ipam/leader/... ./pkg/ipam/nodewatch/... ./pkg/ipam/store/kube/... ./pkg/ipamd/...
test-apiserver:
	$(GO) test -tags apiserver $(TESTFLAGS) $(APISERVER_PKGS)

test-short:
	$(GO) test -short -count=1 ./...
	cd $(HELMTEST) && $(GO) test -short -count=1 ./...

tools:
	@mkdir -p $(TOOLBIN)
	GOBIN=$(TOOLBIN) $(NORACE) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc

# The configuration reference's generator compiles the daemons' whole tree:
# it is built the way vet and build compile it (NORACE), so that they find
# that tree in the cache.
generate: tools
	@./scripts/install-deps.sh --check
	protoc -I . \
		--plugin=protoc-gen-go=$(TOOLBIN)/protoc-gen-go \
		--plugin=protoc-gen-go-grpc=$(TOOLBIN)/protoc-gen-go-grpc \
		--go_out=. --go_opt=module=$(MODULE) \
		--go-grpc_out=. --go-grpc_opt=module=$(MODULE) \
		$(PROTOS)
	$(NORACE) $(GO) generate ./deployments/configref

lint:
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(NORACE) $(GO) vet ./...
	$(NORACE) $(GO) vet -tags apiserver,grpcnotrace $(APISERVER_PKGS) ./internal/apiservertest/...
	cd $(HELMTEST) && $(NORACE) $(GO) vet ./...
	cd test/kube && $(NORACE) $(GO) vet ./...

bench:
	./scripts/bench.sh

# Every figure of the README's performance table, benchmarks and end-to-end
# scenarios, each beside its baseline from the same run (root).
figures: preflight-figures
	./scripts/figures.sh

lab: preflight-lab build
	$(BIN)/lab run

# A Kubernetes cluster of CLUSTER_NODES nodes (1 to 5), each a network and
# a mount namespace, on this machine (root; docs/kubernetes.md, "The test
# cluster"): the first start builds Kubernetes and helm from the Go module
# proxy into /var/cache/causeway (tens of minutes); later starts reuse them.
# cluster-down stops it and leaves the host as it was.
CLUSTER_NODES ?= 1
cluster:
	CLUSTER_NODES=$(CLUSTER_NODES) ./scripts/cluster/up.sh

cluster-down:
	./scripts/cluster/down.sh

# The Kubernetes end-to-end suite (root, on a cluster started by `make
# cluster`, into which it loads the images of this clone); a module of its
# own, not part of `make test`.
KUBETESTFLAGS ?= -count=1 -timeout 40m
test-kube: build
	./scripts/cluster/load-images.sh $(BIN) $(IMAGE_TAG)
	cd test/kube && CAUSEWAY_IMAGE_TAG=$(IMAGE_TAG) $(NORACE) $(GO) test $(KUBETESTFLAGS) ./...

# Explicit targets: make skips pattern rules for .PHONY targets.
preflight-test preflight-lab preflight-figures preflight-images:
	@./scripts/preflight.sh $(@:preflight-%=%)

deps:
	./scripts/install-deps.sh

clean:
	rm -rf $(BIN) $(TOOLBIN)
