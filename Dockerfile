# One image, both binaries: reloader (sidecar, subprocess, init container) and wave.
#   docker build --build-arg VERSION=v0.1.0 -t configwave:v0.1.0 .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd ./cmd
COPY internal ./internal
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/ ./cmd/reloader ./cmd/wave

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/reloader /out/wave /
USER 65532:65532
ENTRYPOINT ["/wave"]
