package broker

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/vltava/vltava/core/config"
)

// loadMetaProperties reads <dir>/meta.properties, creating it on first
// start. It returns the cluster ID and refuses a data directory that
// belongs to another node or cluster, as Kafka does.
func loadMetaProperties(dir string, cfg config.Broker) (string, error) {
	path := filepath.Join(dir, "meta.properties")
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		id := cfg.ClusterID
		if id == "" {
			id = newClusterID()
		}
		body := fmt.Sprintf("# written by vltava on first start\nversion=1\ncluster.id=%s\nnode.id=%d\n", id, cfg.NodeID)
		if err := writeFileSync(path, []byte(body)); err != nil {
			return "", fmt.Errorf("broker: meta.properties: %w", err)
		}
		return id, nil
	}
	if err != nil {
		return "", fmt.Errorf("broker: meta.properties: %w", err)
	}
	props := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			props[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	id := props["cluster.id"]
	if id == "" {
		return "", fmt.Errorf("broker: %s has no cluster.id", path)
	}
	if cfg.ClusterID != "" && cfg.ClusterID != id {
		return "", fmt.Errorf("broker: %s belongs to cluster %s, config says %s", path, id, cfg.ClusterID)
	}
	if n, err := strconv.ParseInt(props["node.id"], 10, 32); err != nil || int32(n) != cfg.NodeID {
		return "", fmt.Errorf("broker: %s belongs to node %s, config says %d", path, props["node.id"], cfg.NodeID)
	}
	return id, nil
}

// newClusterID makes a Kafka-style cluster ID: 16 random bytes in URL-safe
// base64 without padding.
func newClusterID() string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	return base64.RawURLEncoding.EncodeToString(u[:])
}

// writeFileSync writes a small file atomically: a temporary file, fsync,
// rename, fsync of the directory.
func writeFileSync(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
