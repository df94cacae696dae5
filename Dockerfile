# The images for docker build users; `make image` builds the same ones without a container
# engine. Both hold the same tree, written by the same code (hack/release --rootfs), the same
# user and the same entrypoints, which a test checks (internal/ociimage).
#   docker build --build-arg VERSION=v0.1.0 --target wave -t configwave:v0.1.0 .
#   docker build --build-arg VERSION=v0.1.0 --target reloader -t configwave:v0.1.0-reloader .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG TARGETOS
ARG TARGETARCH
RUN GOOS=${TARGETOS} GOARCH=${TARGETARCH} go run ./hack/release --version=${VERSION} --rootfs=/rootfs

FROM scratch AS reloader
COPY --from=build /rootfs/ /
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
ARG VERSION=dev
ARG REVISION
LABEL org.opencontainers.image.source=https://github.com/configwave/configwave org.opencontainers.image.licenses=Apache-2.0 org.opencontainers.image.title="configwave reloader" org.opencontainers.image.version=${VERSION} org.opencontainers.image.revision=${REVISION}
USER 65532:65532
WORKDIR /
ENTRYPOINT ["/reloader"]

FROM scratch AS wave
COPY --from=build /rootfs/ /
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
ARG VERSION=dev
ARG REVISION
LABEL org.opencontainers.image.source=https://github.com/configwave/configwave org.opencontainers.image.licenses=Apache-2.0 org.opencontainers.image.title="configwave wave" org.opencontainers.image.version=${VERSION} org.opencontainers.image.revision=${REVISION}
USER 65532:65532
WORKDIR /
ENTRYPOINT ["/wave"]
