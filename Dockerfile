# Causeway's images: one runtime image per binary (proxy, ipam, nsp), each
# FROM scratch with nothing but its static binary (the proxy's also holds
# causeway-upgrade, its upgrade step), run as a non-root numeric
# user. Build one with its stage name as the target:
#
#   docker build --target proxy --build-arg VERSION=v1.0.0 -t causeway/proxy:v1.0.0 .
#
# compiles everything in a golang image (needs a registry, and BuildKit, Docker's
# default builder, which skips the unused prebuilt stage). Offline, `make
# images` builds the same stages with buildah from the binaries of `make
# build`: BINARIES=prebuilt takes them from the context's bin/ instead, where
# scripts/build-images.sh has already given the proxy its file capability.
# `make images-full` builds the whole path offline, compile stage included,
# on a local stand-in of the golang image (scripts/build-images-full.sh).
#
# The proxy binary carries exactly cap_net_admin as a file capability (a
# non-root process gets no capability from the pod spec alone): netlink,
# nftables, conntrack and its namespace's sysctls need it; the gratuitous
# ARP / unsolicited NA are sent by the kernel. A scratch stage has no
# setcap, so the capability is set where a setcap exists (the compile stage,
# or the host for prebuilt binaries) and travels with the file: COPY keeps the
# security.capability extended attribute (checked by test/images).

# compile or prebuilt: where the binaries come from (or an image holding them
# in /out: scripts/build-images-full.sh passes its compile stage's).
ARG BINARIES=compile
ARG GO_IMAGE=docker.io/library/golang:1.26-bookworm

FROM ${GO_IMAGE} AS compile
# setcap, unless the base image has it (the offline stand-in of `make
# images-full` does).
RUN command -v setcap >/dev/null || { apt-get update -qq && apt-get install -y -qq --no-install-recommends libcap2-bin && rm -rf /var/lib/apt/lists/*; }
# The module proxy and Go flags of the builder's machine, if it passes them.
ARG GOPROXY
ARG GOFLAGS
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# The flags of the Makefile's NORACE (grpcnotrace: see there).
RUN CGO_ENABLED=0 go build -trimpath -tags=grpcnotrace -ldflags "-X main.version=${VERSION}" -o /out/ ./cmd/proxy ./cmd/ipam ./cmd/nsp ./cmd/causeway-upgrade \
	&& setcap cap_net_admin=ep /out/proxy

FROM scratch AS prebuilt
COPY bin/proxy bin/ipam bin/nsp bin/causeway-upgrade /out/

FROM ${BINARIES} AS binaries

# Every image runs as uid/gid 10005 (Meridio's), numeric since a scratch
# image has no /etc/passwd; the Helm chart runs the pods as it too.
FROM scratch AS proxy
COPY --from=binaries /out/proxy /usr/local/bin/proxy
# The proxies' upgrade step, run by the chart's post-upgrade hook Job from
# the new proxy image (docs/kubernetes.md, "Upgrades"); no capability.
COPY --from=binaries /out/causeway-upgrade /usr/local/bin/causeway-upgrade
USER 10005:10005
ENTRYPOINT ["/usr/local/bin/proxy"]

FROM scratch AS ipam
COPY --from=binaries /out/ipam /usr/local/bin/ipam
USER 10005:10005
ENTRYPOINT ["/usr/local/bin/ipam"]

FROM scratch AS nsp
COPY --from=binaries /out/nsp /usr/local/bin/nsp
USER 10005:10005
ENTRYPOINT ["/usr/local/bin/nsp"]
