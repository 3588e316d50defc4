package nspwatch

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"

	nspv1 "github.com/causeway-net/causeway/api/nsp/v1"
	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/nspd/configfile"
	"github.com/causeway-net/causeway/pkg/nspd/nspserver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const waitFor = 20 * time.Second

var quiet = slog.New(slog.DiscardHandler)

// twoTrenches has one conduit in each of two trenches.
const twoTrenches = `
trenches: [{name: red}, {name: blue}]
conduits: [{name: lb, trench: red}, {name: lb, trench: blue}]
`

// parse is the configuration of doc.
func parse(t *testing.T, doc string) *configfile.Config {
	t.Helper()
	cfg, err := configfile.Parse([]byte(doc))
	require.NoError(t, err)
	return cfg
}

func TestWatchConduits(t *testing.T) {
	srv := nspserver.New(quiet)
	t.Cleanup(srv.Close)
	srv.SetConfig(parse(t, twoTrenches))
	s := testutil.ServeGRPC(t, "", func(s *grpc.Server) { nspv1.RegisterConfigurationManagerServer(s, srv) })
	conn := s.Dial(t)
	got := make(chan []string, 8)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		WatchConduits(ctx, nspv1.NewConfigurationManagerClient(conn), &nspv1.Conduit{Trench: &nspv1.Trench{Name: "blue"}}, func(cs []*nspv1.Conduit) {
			names := []string{}
			for _, c := range cs {
				names = append(names, c.GetTrench().GetName()+"/"+c.GetName())
			}
			got <- names
		}, WithLogger(quiet))
	}()
	defer func() { cancel(); <-done }()
	next := func() []string {
		select {
		case n := <-got:
			return n
		case <-time.After(waitFor):
			t.Fatal("no conduit update")
			return nil
		}
	}
	assert.Equal(t, []string{"blue/lb"}, next())
	srv.SetConfig(parse(t, strings.Replace(twoTrenches, "{name: lb, trench: blue}", "{name: lb, trench: blue}, {name: lb2, trench: blue}", 1)))
	assert.Equal(t, []string{"blue/lb", "blue/lb2"}, next())
}
