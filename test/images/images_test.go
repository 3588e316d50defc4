package images

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/causeway-net/causeway/deployments/configref"
	"github.com/causeway-net/causeway/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// version is stamped into the binaries; -version of each image must print it.
const version = "image-test-1.0"

// proxyCaps are the proxy binary's file capabilities, as getcap prints them:
// netlink, nftables, conntrack and the sysctls of its namespace need
// CAP_NET_ADMIN, and nothing needs more (the kernel sends the gratuitous
// ARP / unsolicited NA, see pkg/dataplane/announce.go).
const proxyCaps = "cap_net_admin=ep"

// binaries are the images, each named after its binary.
var binaries = []string{"proxy", "ipam", "nsp"}

// extras are the binaries an image holds beside its own: the proxy's
// upgrade step rides in the proxy's image.
var extras = map[string][]string{"proxy": {"causeway-upgrade"}}

// TestImages builds the three images offline and checks, for each, that
// its user is not root, its entrypoint is its binary and the only file of
// its layers, that only the proxy binary carries a file capability and that
// it is exactly proxyCaps, that the binary runs -version from the
// image's root file system as the image's user; and that the proxy starts
// from the image as a pod would (checkProxyStarts).
func TestImages(t *testing.T) {
	testutil.RequireRoot(t)
	for _, tool := range []string{"buildah", "getcap", "setcap", "tar", "chroot"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing: run scripts/install-deps.sh", tool)
		}
	}
	root, err := testutil.ModuleRoot()
	require.NoError(t, err)
	work := t.TempDir()
	storage := []string{"--storage-driver", "vfs", "--root", filepath.Join(work, "storage"), "--runroot", filepath.Join(work, "run")}

	start := time.Now()
	bindir := buildStatic(t, filepath.Join(work, "bin"))
	t.Logf("FIGURE: static binaries built in %s", time.Since(start).Round(time.Millisecond))

	start = time.Now()
	cmd := exec.Command(filepath.Join(root, "scripts", "build-images.sh"), bindir, "test")
	cmd.Env = append(os.Environ(), "IMAGE_REPO=localhost/causeway-test",
		"BUILDAH_ROOT="+storage[3], "BUILDAH_RUNROOT="+storage[5])
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "build-images.sh:\n%s", out)
	t.Logf("FIGURE: three images built with buildah (vfs) in %s", time.Since(start).Round(time.Millisecond))

	for _, name := range binaries {
		t.Run(name, func(t *testing.T) {
			img := exportImage(t, storage, "localhost/causeway-test/"+name+":test", filepath.Join(work, "oci-"+name))
			rootfs := filepath.Join(work, "rootfs-"+name)
			for _, layer := range img.layers {
				extract(t, layer, rootfs)
			}
			checkImage(t, name, img.config, rootfs)
		})
	}
}

// buildStatic builds the three binaries as `make build` does (static,
// trimmed paths, version stamped) into dir.
func buildStatic(t *testing.T, dir string) string {
	t.Setenv("CGO_ENABLED", "0")
	for _, name := range append(slices.Clone(binaries), extras["proxy"]...) {
		_, err := testutil.BuildBinary(dir, "./cmd/"+name, "-ldflags", "-X main.version="+version)
		require.NoError(t, err)
	}
	return dir
}

// checkImage checks one image's configuration and root file system.
func checkImage(t *testing.T, name string, cfg imageConfig, rootfs string) {
	binary := configref.ImageBinary(name)
	require.Equal(t, []string{binary}, cfg.Entrypoint, "entrypoint")
	uid, gid := parseUser(t, cfg.User)
	require.NotZero(t, uid, "the image runs as root (user %q)", cfg.User)
	require.Equal(t, []int{configref.ImageUser, configref.ImageUser}, []int{uid, gid}, "the user the chart runs the pods as")

	files := []string{binary}
	for _, extra := range extras[name] {
		files = append(files, configref.ImageBinary(extra))
	}
	require.ElementsMatch(t, files, regularFiles(t, rootfs), "the image holds its binary (and its extras) and nothing else")

	caps := fileCapabilities(t, rootfs)
	if name == "proxy" {
		require.Equal(t, map[string]string{binary: proxyCaps}, caps, "file capabilities")
	} else {
		require.Empty(t, caps, "file capabilities")
	}

	for _, b := range files {
		run := exec.Command("chroot", fmt.Sprintf("--userspec=%d:%d", uid, gid), rootfs, b, "-version")
		out, err := run.CombinedOutput()
		require.NoError(t, err, "%s -version as %d:%d in the image's root: %s", b, uid, gid, out)
		require.Equal(t, version, strings.TrimSpace(string(out)))
	}

	if name == "proxy" {
		checkProxyStarts(t, rootfs, uid, gid)
	}
}

// parseUser reads a numeric "uid:gid" image user; a name could not be
// resolved in a scratch image, which has no /etc/passwd.
func parseUser(t *testing.T, user string) (uid, gid int) {
	u, g, ok := strings.Cut(user, ":")
	require.True(t, ok, "image user %q is not uid:gid", user)
	uid, err := strconv.Atoi(u)
	require.NoError(t, err, "image user %q is not numeric", user)
	gid, err = strconv.Atoi(g)
	require.NoError(t, err, "image group %q is not numeric", user)
	return uid, gid
}

// regularFiles lists the regular files under rootfs, as absolute paths of
// the image.
func regularFiles(t *testing.T, rootfs string) []string {
	var files []string
	err := filepath.WalkDir(rootfs, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(rootfs, p)
		files = append(files, "/"+rel)
		return err
	})
	require.NoError(t, err)
	slices.Sort(files)
	return files
}

// fileCapabilities runs getcap over rootfs and returns the capabilities of
// each file that has some, by its path in the image.
func fileCapabilities(t *testing.T, rootfs string) map[string]string {
	out, err := exec.Command("getcap", "-r", rootfs).CombinedOutput()
	require.NoError(t, err, "getcap: %s", out)
	caps := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" {
			continue
		}
		path, set, ok := strings.Cut(line, " ")
		require.True(t, ok, "getcap line %q", line)
		caps[strings.TrimPrefix(path, rootfs)] = strings.TrimSpace(set)
	}
	return caps
}

// extract unpacks a layer into rootfs with its extended attributes (the
// file capability is one: security.capability).
func extract(t *testing.T, layer, rootfs string) {
	require.NoError(t, os.MkdirAll(rootfs, 0o755))
	out, err := exec.Command("tar", "--xattrs", "--xattrs-include=*", "-xf", layer, "-C", rootfs).CombinedOutput()
	require.NoError(t, err, "tar: %s", out)
}
