# Multi-stage build: a static car-server binary in an otherwise empty image,
# run as a non-root user with its state root on a volume.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/car-server ./cmd/car-server \
 && mkdir -p /out/data

FROM scratch
COPY --from=build /out/car-server /car-server
# The state root exists in the image, owned by the runtime user, so a fresh
# named volume starts writable.
COPY --from=build --chown=65532:65532 /out/data /data
ENV CAR_HOME=/data HOME=/data
VOLUME ["/data"]
EXPOSE 9100 9102
USER 65532:65532
# Inside the container the daemon listens on every interface so the published
# ports work (9100 the WebSocket, 9102 the MCP endpoint); it refuses to do so
# with auth off.
ENTRYPOINT ["/car-server", "--bind", "0.0.0.0", "--mcp-bind", "0.0.0.0:9102"]
