# The released source of the programs the test cluster runs that the Go
# module proxy does not serve (sourced by lib.sh): NSM's nsmgr and
# registry-k8s (and sdk-k8s, which the registry imports) and SPIRE's
# controller manager. They are test fixtures, built into the cluster's
# images (images.sh); nothing of the product uses them.
#
# Where the clone has ../shared/third_party beside it (this project's
# machines and CI: a read-only copy of each tree at its tag, with its
# licence), that is the source; elsewhere each tag is cloned once from the
# project's public repository into $CAUSEWAY_CACHE/src and checked against
# the commit below. CAUSEWAY_THIRD_PARTY names another such folder.

# name, Go module, repository, tag, commit
THIRD_PARTY=(
	"cmd-nsmgr github.com/networkservicemesh/cmd-nsmgr https://github.com/networkservicemesh/cmd-nsmgr v1.18.0 94fea06ac73da88eddbe706e238cc25696dbbbd8"
	"cmd-registry-k8s github.com/networkservicemesh/cmd-registry-k8s https://github.com/networkservicemesh/cmd-registry-k8s v1.18.0 8aea49b5eec57f3df0b397f7746345bb12158032"
	"sdk-k8s github.com/networkservicemesh/sdk-k8s https://github.com/networkservicemesh/sdk-k8s v1.18.0 267fbe43b7bb9cacb74e32dc81d41ea54fa346f7"
	"spire-controller-manager github.com/spiffe/spire-controller-manager https://github.com/spiffe/spire-controller-manager v0.6.6 9ef4eef2a307bb54d31781f1f505e00296c85020"
)
THIRD_PARTY_SHARED="${CAUSEWAY_THIRD_PARTY:-$CLUSTER_REPO/../shared/third_party}"

# third_party_entry NAME: NAME's line of THIRD_PARTY.
third_party_entry() {
	local entry
	for entry in "${THIRD_PARTY[@]}"; do
		if [ "${entry%% *}" = "$1" ]; then
			echo "$entry"
			return
		fi
	done
	die "no third-party source named $1"
}

# third_party_dir NAME: the directory of NAME's source tree (cloned on
# first use where no shared copy exists).
third_party_dir() {
	local name mod repo tag commit
	read -r name mod repo tag commit <<<"$(third_party_entry "$1")"
	if [ -d "$THIRD_PARTY_SHARED/$name" ]; then
		(cd "$THIRD_PARTY_SHARED/$name" && pwd)
		return
	fi
	local dir="$CAUSEWAY_CACHE/src/$name-$tag" got
	if [ ! -d "$dir" ]; then
		log "cloning $repo $tag into $dir"
		rm -rf "$dir.partial"
		mkdir -p "$(dirname "$dir")"
		# (explicit checks: a command substitution does not inherit set -e)
		git clone --quiet --depth 1 --branch "$tag" "$repo" "$dir.partial" >&2 ||
			die "cannot clone $repo $tag (or give its source in $THIRD_PARTY_SHARED/$name)"
		got="$(git -C "$dir.partial" rev-parse HEAD)" || die "no commit in the clone of $repo"
		if [ "$got" != "$commit" ]; then
			rm -rf "$dir.partial"
			die "$repo $tag is commit $got, want $commit"
		fi
		mv "$dir.partial" "$dir"
	fi
	echo "$dir"
}

# third_party_module NAME: NAME's Go module path.
third_party_module() {
	local name mod
	read -r name mod _ <<<"$(third_party_entry "$1")"
	echo "$mod"
}

# third_party_deps NAME: the other third-party modules NAME's go.mod
# requires (each replaced by its source when NAME is built).
third_party_deps() {
	local dir entry name mod
	dir="$(third_party_dir "$1")" || return 1
	for entry in "${THIRD_PARTY[@]}"; do
		read -r name mod _ <<<"$entry"
		if [ "$name" != "$1" ] && grep -qE "^[[:space:]]*(require[[:space:]]+)?$mod[[:space:]]+v" "$dir/go.mod"; then
			echo "$name"
		fi
	done
}

# third_party_hash NAME: every file of NAME's source and of its
# third-party requirements with its hash, by path within its tree. (The
# functions here check each step: they also run in command substitutions,
# which do not inherit set -e.)
third_party_hash() {
	local n deps dir
	deps="$(third_party_deps "$1")" || return 1
	for n in "$1" $deps; do
		dir="$(third_party_dir "$n")" || return 1
		echo "$n"
		(cd "$dir" && find . -type f -not -path './.git/*' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum) || return 1
	done
}

# third_party_build NAME PKG WORKDIR OUT: builds the command PKG of NAME's
# source into the file OUT, static, in a copy under WORKDIR (the source
# stays untouched) whose go.mod replaces each third-party requirement with
# its source.
third_party_build() {
	local name="$1" pkg="$2" src="$3/src" out="$4" dir deps dep depdir
	dir="$(third_party_dir "$name")" || return 1
	deps="$(third_party_deps "$name")" || return 1
	mkdir -p "$src"
	cp -r "$dir/." "$src"
	chmod -R u+w "$src"
	for dep in $deps; do
		depdir="$(third_party_dir "$dep")" || return 1
		(cd "$src" && go mod edit -replace "$(third_party_module "$dep")=$depdir")
	done
	(cd "$src" && GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out" "$pkg")
}

# third_party_link: points $CLUSTER_TOOLS/third_party/<name> at the source of
# each third-party module that the cluster's tools module replaces by such a
# directory (its go.mod says which), so that go finds them. The links are
# not part of the clone (.gitignore); made again on every build.
third_party_link() {
	local name dir
	mkdir -p "$CLUSTER_TOOLS/third_party" || return 1
	for name in $(sed -n 's#^[[:space:]]*[^[:space:]]* => ./third_party/\([^[:space:]]*\)$#\1#p' "$CLUSTER_TOOLS/go.mod"); do
		dir="$(third_party_dir "$name")" || return 1
		ln -sfn "$dir" "$CLUSTER_TOOLS/third_party/$name" || return 1
	done
}
