package images

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// imageConfig is the part of an OCI image configuration the test checks.
type imageConfig struct {
	User       string   `json:"User"`
	Entrypoint []string `json:"Entrypoint"`
}

// image is an image exported to an OCI layout: its configuration and the
// paths of its layer blobs, bottom first.
type image struct {
	config imageConfig
	layers []string
}

type descriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
}

// exportImage pushes ref from the buildah storage into an OCI layout at dir
// (what a registry would receive) and reads it back.
func exportImage(t *testing.T, storage []string, ref, dir string) image {
	args := append(append([]string{}, storage...), "push", "--quiet", ref, "oci:"+dir+":image")
	out, err := exec.Command("buildah", args...).CombinedOutput()
	require.NoError(t, err, "buildah push: %s", out)

	var index struct {
		Manifests []descriptor `json:"manifests"`
	}
	readJSON(t, filepath.Join(dir, "index.json"), &index)
	require.Len(t, index.Manifests, 1, "manifests in the layout")
	var manifest struct {
		Config descriptor   `json:"config"`
		Layers []descriptor `json:"layers"`
	}
	readJSON(t, blob(dir, index.Manifests[0].Digest), &manifest)
	var config struct {
		Config imageConfig `json:"config"`
	}
	readJSON(t, blob(dir, manifest.Config.Digest), &config)
	img := image{config: config.Config}
	for _, l := range manifest.Layers {
		img.layers = append(img.layers, blob(dir, l.Digest))
	}
	require.NotEmpty(t, img.layers, "layers")
	return img
}

// blob is the path of a blob of an OCI layout.
func blob(dir, digest string) string {
	algo, hex, _ := strings.Cut(digest, ":")
	return filepath.Join(dir, "blobs", algo, hex)
}

func readJSON(t *testing.T, path string, v any) {
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, v), "%s", path)
}
