// Package apiservertest runs a real Kubernetes API server for a test, as
// envtest does: Debian's etcd and the kube-apiserver the test cluster's
// build leaves in its cache (scripts/cluster/build-k8s.sh), as processes
// of the test, in a temporary directory, stopped at its end. Either can be
// stopped and started again to play an outage. It also installs CRDs from
// files.
package apiservertest

import (
	"bufio"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/causeway-net/causeway/internal/testutil"
)

// BinaryEnv names the kube-apiserver to run, overriding the cache path.
const BinaryEnv = "CAUSEWAY_KUBE_APISERVER"

// Binary returns the path of kube-apiserver: $CAUSEWAY_KUBE_APISERVER, or
// $CAUSEWAY_CACHE (default /var/cache/causeway)/k8s-<version>/bin, the
// version being the one test/kube/tools/cluster/go.mod requires (as
// scripts/cluster/lib.sh computes it). moduleRoot is the main module's
// directory.
func Binary(moduleRoot string) (string, error) {
	if p := os.Getenv(BinaryEnv); p != "" {
		return p, nil
	}
	mod, err := os.ReadFile(filepath.Join(moduleRoot, "test/kube/tools/cluster/go.mod"))
	if err != nil {
		return "", fmt.Errorf("the Kubernetes version of the test cluster: %w", err)
	}
	version := ""
	sc := bufio.NewScanner(strings.NewReader(string(mod)))
	for sc.Scan() {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "require "))
		if len(f) >= 2 && f[0] == "k8s.io/kubernetes" && strings.HasPrefix(f[1], "v") {
			version = f[1]
			break
		}
	}
	if version == "" {
		return "", fmt.Errorf("test/kube/tools/cluster/go.mod requires no k8s.io/kubernetes")
	}
	cache := os.Getenv("CAUSEWAY_CACHE")
	if cache == "" {
		cache = "/var/cache/causeway"
	}
	return filepath.Join(cache, "k8s-"+version, "bin", "kube-apiserver"), nil
}

// Require returns the kube-apiserver and etcd binaries, or skips t when one
// is missing, unless CAUSEWAY_REQUIRE_ROOT is set (CI), where it fails t.
func Require(t testing.TB, moduleRoot string) (apiserver, etcd string) {
	t.Helper()
	missing := func(what string, err error) {
		t.Helper()
		msg := fmt.Sprintf("%s is missing (%v): build it with scripts/cluster/build-k8s.sh or set %s", what, err, BinaryEnv)
		if os.Getenv("CAUSEWAY_REQUIRE_ROOT") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	apiserver, err := Binary(moduleRoot)
	if err == nil {
		_, err = os.Stat(apiserver)
	}
	if err != nil {
		missing("kube-apiserver", err)
	}
	if etcd, err = exec.LookPath("etcd"); err != nil {
		missing("etcd", err)
	}
	return apiserver, etcd
}

// Server is an API server and its etcd.
type Server struct {
	// Config reaches the API server as a cluster admin.
	Config *rest.Config
	// Host is host:port of the API server.
	Host string

	t                 testing.TB
	dir               string
	etcdBin, apiBin   string
	etcdArgs, apiArgs []string
	etcd, api         *exec.Cmd
}

// Start starts etcd and the API server in a temporary directory and
// stops them at the end of t.
func Start(t testing.TB, apiserver, etcd string) *Server {
	t.Helper()
	dir := t.TempDir()
	ports := testutil.FreePorts(t, 3)
	client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	s := &Server{
		t: t, dir: dir, etcdBin: etcd, apiBin: apiserver,
		Host: fmt.Sprintf("127.0.0.1:%d", ports[2]),
	}
	s.etcdArgs = []string{
		"--name", "test", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "test=" + peer, "--log-level", "warn",
	}
	token := randomHex(t)
	writeFile(t, filepath.Join(dir, "tokens.csv"), token+",admin,admin,system:masters\n")
	writeServiceAccountKey(t, dir)
	s.apiArgs = []string{
		"--etcd-servers", client, "--bind-address", "127.0.0.1", "--secure-port", fmt.Sprint(ports[2]),
		"--cert-dir", filepath.Join(dir, "certs"), "--token-auth-file", filepath.Join(dir, "tokens.csv"),
		"--authorization-mode", "RBAC",
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", filepath.Join(dir, "sa.pem"),
		"--service-account-signing-key-file", filepath.Join(dir, "sa.pem"),
		"--service-cluster-ip-range", "10.0.0.0/24", "--profiling=false",
	}
	s.Config = &rest.Config{
		Host: "https://" + s.Host, BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}, QPS: 1000, Burst: 2000,
	}
	t.Cleanup(func() {
		s.StopAPIServer()
		s.StopEtcd()
	})
	s.StartEtcd()
	s.StartAPIServer()
	return s
}

// Dir is the temporary directory of the processes (their logs are there).
func (s *Server) Dir() string { return s.dir }

// StartEtcd starts etcd (again) and waits until it answers.
func (s *Server) StartEtcd() {
	s.t.Helper()
	s.etcd = s.run("etcd", s.etcdBin, s.etcdArgs)
	url := s.etcdArgs[7] + "/health"
	s.wait("etcd", func() bool {
		r, err := http.Get(url)
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == http.StatusOK
	})
}

// StartAPIServer starts the API server (again) and waits until it is ready.
func (s *Server) StartAPIServer() {
	s.t.Helper()
	s.api = s.run("kube-apiserver", s.apiBin, s.apiArgs)
	hc, err := rest.HTTPClientFor(s.Config)
	if err != nil {
		s.t.Fatalf("API server client: %v", err)
	}
	hc.Timeout = 2 * time.Second
	s.wait("kube-apiserver", func() bool {
		r, err := hc.Get(s.Config.Host + "/readyz")
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == http.StatusOK
	})
}

// StopEtcd stops etcd (SIGTERM, then SIGKILL) and waits for it.
func (s *Server) StopEtcd() { stop(s.etcd); s.etcd = nil }

// StopAPIServer stops the API server and waits for it.
func (s *Server) StopAPIServer() { stop(s.api); s.api = nil }

func (s *Server) run(name, bin string, args []string) *exec.Cmd {
	s.t.Helper()
	logf, err := os.OpenFile(filepath.Join(s.dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		s.t.Fatalf("%s log: %v", name, err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start %s: %v", name, err)
	}
	return cmd
}

// wait polls ready until it holds; two minutes guard only against a
// process that never comes up (a busy machine takes seconds).
func (s *Server) wait(name string, ready func() bool) {
	s.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !ready() {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, name+".log"))
			if len(log) > 4000 {
				log = log[len(log)-4000:]
			}
			s.t.Fatalf("%s did not become ready; end of its log:\n%s", name, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func stop(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

func randomHex(t testing.TB) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// writeServiceAccountKey writes sa.pem: the key that signs (and, its
// public half, verifies) service account tokens.
func writeServiceAccountKey(t testing.TB, dir string) {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "sa.pem"), string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})))
}
