# configwave — see README.md. Every tool is installed by these targets; nothing by hand.
GO          ?= go
BIN         := bin
STATICCHECK := $(shell $(GO) env GOPATH)/bin/staticcheck
STATICCHECK_VERSION := v0.8.2
# Helm's own CLI packages the chart in `make release`; the tests build the same version from
# hack/testprograms, with the other programs they run.
HELM        := $(shell $(GO) env GOPATH)/bin/helm
HELM_VERSION := v4.3.1
# Per package: a package may wait for the real node while other packages use it.
TEST_TIMEOUT ?= 30m

# Each fuzz target runs briefly in every `make test`; `make fuzz FUZZTIME=500000x` runs longer.
# A count, not a duration: with a duration, Go 1.26's fuzz coordinator can report a spurious
# "context deadline exceeded" at the boundary (golang/go#75804, fixed in Go 1.27).
FUZZTIME ?= 20000x
FUZZ_TARGETS := FuzzValidatePath:./internal/reloader/unpack FuzzParseRef:./internal/reloader/apisource FuzzParseRecord:./internal/reloader/onefirst FuzzParseKept:./internal/reloader/onefirst FuzzParseIndex:./internal/wave/revisions FuzzParse:./internal/wave/revisionhook \
	FuzzParseCodeSet:./internal/reloader/notify FuzzParseSignal:./internal/reloader/notify \
	FuzzReloaderFlags:./cmd/reloader FuzzParseItem:./cmd/reloader FuzzParseHeader:./cmd/reloader \
	FuzzWaveFlags:./cmd/wave FuzzLayoutFiles:./internal/reloader/reload \
	FuzzParseExtra:./internal/wave/podrefs FuzzParseInputs:./internal/wave/confighash \
	FuzzParseRecord:./internal/wave/rolloutrecord FuzzParseStakater:./internal/wave/podrefs \
	FuzzExpand:./internal/reloader/configfile FuzzToldRecord:./internal/reloader/reload FuzzTransform:./internal/wave/csi \
	FuzzDecodeProtobuf:./internal/reloader/coreclient FuzzResourceVersion:./internal/wave/digeststore \
	FuzzParse:./internal/reloader/webconfig FuzzParse:./internal/plugin/target FuzzWriteNeverShowsASecretValue:./internal/plugin/configdiff FuzzParse:./internal/wave/window \
	FuzzIncompleteNeverShowsTheData:./internal/wave/sourceready FuzzWriterTransform:./internal/wave/sourceready

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

.PHONY: build image release test beside-go-test lint format staticcheck programs fuzz deps controlplane argo-rollouts prometheus-operator demo bench docs clean

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-X main.version=$(VERSION)" -o $(BIN)/ ./cmd/reloader ./cmd/wave ./cmd/kubectl-configwave
	CGO_ENABLED=0 $(GO) build -trimpath -tags configwave_fileonly -ldflags "-X main.version=$(VERSION)" -o $(BIN)/reloader-fileonly ./cmd/reloader

# What a release publishes, under dist/ (emptied first): static binaries for each platform,
# the images as one oci-archive, the chart package, an SPDX SBOM and SHA256SUMS. `make test`
# builds it for this machine's platform only (hack/release's test): a second platform's
# compile would cost CI 2 minutes.
RELEASE_PLATFORMS ?= linux/amd64,linux/arm64
release: $(HELM)
	rm -rf dist
	$(GO) run ./hack/release --version=$(VERSION) --out=dist --platforms=$(RELEASE_PLATFORMS) --helm=$(HELM)

# The images, built in Go from the static binaries (no container engine, no base image), as an
# OCI image layout under dist/image: one multi-platform index tagged "reloader" and one tagged
# "wave". Push with: skopeo copy --all oci:dist/image:wave docker://REGISTRY/configwave:TAG
image:
	rm -rf dist/image
	$(GO) run ./hack/release --image-only --version=$(VERSION) --out=dist/image --platforms=$(RELEASE_PLATFORMS)

$(STATICCHECK):
	$(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

$(HELM):
	$(GO) install helm.sh/helm/v4/cmd/helm@$(HELM_VERSION)

# gofmt, go mod verify, go vet and staticcheck. `make test` runs the same checks, with go vet
# inside `go test -vet=all` and staticcheck on the -race build (GOFLAGS), so that one compile of
# every package serves the checks and the tests: a separate plain build cost a cold run 10
# minutes on 2 cores.
lint: format $(STATICCHECK)
	$(GO) vet ./...
	GOFLAGS=-race $(STATICCHECK) ./...
	$(GO) vet -tags configwave_fileonly ./cmd/reloader
	GOFLAGS=-race $(STATICCHECK) -tags configwave_fileonly ./cmd/reloader
	cd bench && $(GO) vet ./... && GOFLAGS=-race $(STATICCHECK) ./...

format:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed on: $$unformatted"; exit 1; fi
	$(GO) mod verify

# Lists the modules our packages (tests included) come from that have a newer patch release;
# needs the module proxy. Not part of `make test`: a release upstream must never turn a build
# red by itself. Pseudo-versions, which Kubernetes pins, are left out.
deps:
	@$(GO) list -m -u -f '{{if .Update}}{{.Path}} {{.Version}} {{.Update.Version}}{{end}}' \
	  $$($(GO) list -deps -test -f '{{with .Module}}{{if not .Main}}{{.Path}}{{end}}{{end}}' ./... | sort -u) | \
	  grep -Ev -- '-[0-9]{14}-[0-9a-f]{12}( |$$)' | \
	  awk '{ split($$2, a, "."); split($$3, b, "."); if (a[1] == b[1] && a[2] == b[2]) { print "patch release:", $$0; n++ } } \
	  END { if (!n) print "every module we build from is at its newest patch release" }'

# Builds etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and kwok once into the
# cache (CONFIGWAVE_CACHE, else the user cache folder), with progress, before tests need them.
controlplane:
	$(GO) run ./hack/devcluster --build-only

# Builds the Argo Rollouts controller once into the same cache, from the same module graph: the
# tests of wave's Rollout kind run it beside kube-controller-manager.
argo-rollouts:
	$(GO) run ./hack/devcluster --build-argo-rollouts

# Builds the Prometheus Operator once into the same cache: the image tests run the reloader
# containers it renders.
prometheus-operator:
	$(GO) run ./hack/devcluster --build-prometheus-operator

# Each phase prints its time (hack/timed). The programs the tests run are built by one process,
# all at once, while staticcheck is installed. Then go test, three
# packages at a time: the real node runs one package's tests at a time (a package gives it up
# between its tests when another waits, testcluster's nodeshare.go), and a third package keeps
# the cores busy meanwhile; beside it, at the lowest priority, the bench checks and the fuzz
# targets (hack/beside), in the cores' idle time. The bench module's checks build with -race, like
# ours, so that they reuse the packages go test compiles.
test:
	@hack/timed "format and modules" $(MAKE) --no-print-directory format
	@hack/timed "the programs the tests run, and staticcheck installed" $(MAKE) --no-print-directory -j2 $(STATICCHECK) programs
	@hack/timed "go test, with staticcheck, the bench checks and fuzz beside it" hack/beside "$(MAKE) --no-print-directory beside-go-test" \
	  hack/timed "go test -race (go vet inside)" $(GO) test -race -vet=all -count=1 -p 3 -timeout $(TEST_TIMEOUT) ./...

# Beside go test, at the lowest priority: staticcheck first (at nice 19 it waits while go test
# compiles, then finds most of what it loads in the build cache), then the bench module's
# checks, then fuzzing. A cold run's programs build keeps both cores busy on its own; the
# real-node tests leave a third of them idle.
beside-go-test:
	@hack/timed "staticcheck" $(MAKE) --no-print-directory staticcheck
	@hack/timed "bench: staticcheck, test (go vet inside)" sh -c 'cd bench && GOFLAGS=-race $(STATICCHECK) ./... && $(GO) test -race -vet=all -count=1 ./...'
	@hack/timed "fuzz" $(MAKE) --no-print-directory fuzz

staticcheck: $(STATICCHECK)
	GOFLAGS=-race $(STATICCHECK) ./...
	GOFLAGS=-race $(STATICCHECK) -tags configwave_fileonly ./cmd/reloader

# Every program the tests run, built at once into the cache (each is reused while its version
# stands): the control plane, kwok, Helm, the Prometheus Operator and the Argo Rollouts
# controller in one go build from one module graph (hack/testprograms), so that the packages they
# share compile once. After a version in its go.mod is changed: go run ./hack/devcluster --tidy-programs.
programs:
	$(GO) run -race ./hack/devcluster --build-only --build-argo-rollouts --build-prometheus-operator --build-helm

fuzz:
	@for t in $(FUZZ_TARGETS); do \
	  start=$$(date +%s); \
	  $(GO) test -short -run '^$$' -fuzz "^$${t%%:*}$$" -fuzztime $(FUZZTIME) "$${t#*:}" || { \
	    echo "A crasher is saved under $${t#*:}/testdata/fuzz/$${t%%:*}/: fix the bug and commit the file, so every go test replays it."; exit 1; }; \
	  echo "fuzz $${t%%:*}: $(FUZZTIME) in $$(( $$(date +%s) - start ))s"; \
	done

# A local control plane, wave and a reloader sidecar, one ConfigMap change, printed as it
# happens; the control plane stays up until Ctrl-C.
demo: controlplane
	$(GO) run ./hack/demo

# Latency, cost and memory against floors measured in the same run, written to README.md's figures,
# docs/benchmarks.md, bench/results.json and docs/plots/. BENCH_MODE=full for every scale.
BENCH_MODE ?= quick
bench: controlplane
	cd bench && $(GO) run . -mode=$(BENCH_MODE) $(BENCH_ARGS)

# Flag references in docs/ from the binaries' own --help, and the README's figures from
# bench/results.json (a test fails when either is stale).
docs:
	$(GO) test -short -run TestFlagsDocIsCurrent ./cmd/reloader ./cmd/wave -args -update
	$(GO) test -run TestReadmeFiguresMatchResults ./internal/build/repocheck -args -update

clean:
	rm -rf $(BIN)
	@echo 'The control-plane cache stays; remove $$CONFIGWAVE_CACHE or, by default, $${XDG_CACHE_HOME:-~/.cache}/configwave to rebuild it.'
