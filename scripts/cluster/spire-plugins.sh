# SPIRE's server and agent as the test cluster builds them (sourced by
# lib.sh, not run): with only the built-in plugins that the cluster's SPIRE
# configuration names (manifests/spire.yaml), and a few small spares for a test's
# own configuration. SPIRE registers every built-in plugin in the catalog
# files of pkg/server/catalog and pkg/agent/catalog, and the cloud
# providers' ones bring their SDKs (AWS's EC2 client alone is 15 MB of Go
# source): the catalogs as built leave them out, and with them most of
# SPIRE's compile. A plugin missing here fails SPIRE's start with its name.
SPIRE_PLUGINS="
server/keymanager/disk server/keymanager/memory
server/nodeattestor/k8spsat server/nodeattestor/jointoken
server/notifier/k8sbundle
server/bundlepublisher/k8sconfigmap
server/credentialcomposer/uniqueid
agent/keymanager/disk agent/keymanager/memory
agent/nodeattestor/k8spsat agent/nodeattestor/jointoken
agent/workloadattestor/k8s agent/workloadattestor/unix
"

# spire_modfile DIR: a copy of the SPIRE module that the cluster's tools
# module requires, in DIR/spire, whose catalog files have neither the
# import nor the registration of a built-in plugin not in SPIRE_PLUGINS,
# and DIR/tools.mod (with DIR/tools.sum), the tools module's go.mod
# replacing SPIRE by that copy, for go build -modfile in the tools module
# (the module cache and the clone stay as they are). Prints the modfile's
# path.
spire_modfile() {
	local dir="$1" src f side
	src="$(cd "$CLUSTER_TOOLS" && go list -m -f '{{.Dir}}' github.com/spiffe/spire)" || return 1
	[ -d "$src/pkg/server/catalog" ] || { log "no SPIRE catalog in $src"; return 1; }
	mkdir -p "$dir" && cp -r "$src" "$dir/spire" && chmod -R u+w "$dir/spire" || return 1
	for f in "$dir"/spire/pkg/server/catalog/*.go "$dir"/spire/pkg/agent/catalog/*.go; do
		case "$f" in *_test.go | */catalog.go) continue ;; esac
		side="$(basename "$(dirname "$(dirname "$f")")")"
		spire_trim "$side" <"$f" >"$f.trimmed" && mv "$f.trimmed" "$f" || return 1
	done
	cp "$CLUSTER_TOOLS/go.mod" "$dir/tools.mod" && cp "$CLUSTER_TOOLS/go.sum" "$dir/tools.sum" || return 1
	(cd "$CLUSTER_TOOLS" && go mod edit -modfile="$dir/tools.mod" -replace "github.com/spiffe/spire=$dir/spire") || return 1
	echo "$dir/tools.mod"
}

# spire_trim SIDE: a catalog file of SIDE (server or agent) on stdin,
# without the built-in plugins not in SPIRE_PLUGINS, on stdout. A plugin's
# import is a line [alias] "github.com/spiffe/spire/pkg/SIDE/plugin/KIND/NAME",
# its registration a line ALIAS.BuiltIn(), (ALIAS is NAME without an alias).
spire_trim() {
	awk -v side="$1" -v keep=" $(echo $SPIRE_PLUGINS) " '
	match($0, /"github\.com\/spiffe\/spire\/pkg\/(server|agent)\/plugin\/[a-z0-9]+\/[a-z0-9]+"/) {
		n = split(substr($0, RSTART + 1, RLENGTH - 2), part, "/")
		alias = ($1 ~ /^"/) ? part[n] : $1
		if (index(keep, " " side "/" part[n - 1] "/" part[n] " ") == 0) {
			dropped[alias] = 1
			next
		}
	}
	/^[ \t]*[a-z0-9]+\.BuiltIn\(\),[ \t]*$/ {
		name = $1
		sub(/\.BuiltIn\(\),$/, "", name)
		if (name in dropped) next
	}
	{ print }
	'
}
