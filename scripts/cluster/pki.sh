# The test cluster's certificates and kubeconfigs (sourced by up.sh): one CA,
# made fresh at every start under $PKI, ECDSA P-256, valid for a week.

# new_cert NAME SUBJECT USAGE [SAN]: $PKI/NAME.{key,crt} signed by the CA;
# USAGE is serverAuth, clientAuth or both.
new_cert() {
	local name="$1" subject="$2" usage="$3" san="${4:-}"
	local ext="$PKI/$name.ext"
	{
		echo "basicConstraints=critical,CA:FALSE"
		echo "keyUsage=critical,digitalSignature,keyEncipherment"
		echo "extendedKeyUsage=$usage"
		[ -n "$san" ] && echo "subjectAltName=$san"
	} >"$ext"
	openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/$name.key" 2>/dev/null
	openssl req -new -key "$PKI/$name.key" -subj "$subject" -out "$PKI/$name.csr" 2>/dev/null
	openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
		-days 7 -extfile "$ext" -out "$PKI/$name.crt" 2>/dev/null
	rm -f "$PKI/$name.csr" "$ext"
}

# new_kubeconfig NAME: $CLUSTER_STATE/kubeconfig/NAME.conf with NAME's client certificate.
new_kubeconfig() {
	local name="$1"
	mkdir -p "$CLUSTER_STATE/kubeconfig"
	cat >"$CLUSTER_STATE/kubeconfig/$name.conf" <<EOC
apiVersion: v1
kind: Config
clusters:
- name: causeway
  cluster:
    server: https://$API_IP:6443
    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
users:
- name: $name
  user:
    client-certificate-data: $(base64 -w0 "$PKI/$name.crt")
    client-key-data: $(base64 -w0 "$PKI/$name.key")
contexts:
- name: causeway
  context: {cluster: causeway, user: $name}
current-context: causeway
EOC
}

# make_pki: the CA, the API server's serving certificate, the service
# account key, one client certificate and kubeconfig per component, and
# each node's kubelet's client and serving certificates.
make_pki() {
	rm -rf "$PKI"
	mkdir -p "$PKI"
	chmod 700 "$PKI"
	openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/ca.key" 2>/dev/null
	openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=causeway-cluster-ca" -days 7 \
		-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
		-out "$PKI/ca.crt" 2>/dev/null
	openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/sa.key" 2>/dev/null
	openssl ec -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
	new_cert apiserver "/CN=kube-apiserver" serverAuth \
		"IP:$API_IP,IP:$API_SERVICE_IP,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
	new_cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
	new_cert admin "/O=system:masters/CN=causeway-admin" clientAuth
	new_cert kube-controller-manager "/CN=system:kube-controller-manager" clientAuth
	new_cert kube-scheduler "/CN=system:kube-scheduler" clientAuth
	new_cert kube-proxy "/CN=system:kube-proxy" clientAuth
	local c i
	for c in admin kube-controller-manager kube-scheduler kube-proxy; do
		new_kubeconfig "$c"
	done
	for i in $(seq 1 "$CLUSTER_NODES"); do
		node_vars "$i"
		new_cert "kubelet-$NODE_NAME" "/O=system:nodes/CN=system:node:$NODE_NAME" clientAuth
		new_cert "kubelet-server-$NODE_NAME" "/CN=$NODE_NAME" serverAuth "IP:$NODE_IP,DNS:$NODE_NAME"
		new_kubeconfig "kubelet-$NODE_NAME"
	done
}
