#!/bin/sh
# One-shot (compose job gitfleet-pki, before Temporal, the registries and
# gitfleet start): a private CA, the certificates each role presents, and
# the registry's passwords (docs/architecture.md §11, "Who reaches Temporal
# and the registry"). Each role's files go to a volume of its own that only
# that role's containers mount; the CA's key stays in pki-ca, which only
# this job mounts. Idempotent: what exists is kept, so every `up` after the
# first changes nothing. Rotate: remove the volume(s) to reissue (pki-ca
# too for a new CA), then `docker compose up -d --force-recreate`.
#
# Files are readable by all (0644; the CA key 0600): the Temporal, UI and
# gitfleet images run as users of their own, so isolation is by mount, not
# by mode.
set -eu
umask 022
out=${GITFLEET_PKI_DIR:-/pki}
days=${GITFLEET_PKI_DAYS:-825}
ca=$out/ca
mkdir -p "$ca"

if [ ! -s "$ca/ca.pem" ]; then
    openssl req -x509 -newkey rsa:3072 -nodes -sha256 -days 3650 \
        -subj "/CN=gitfleet compose CA" -keyout "$ca/ca-key.pem" -out "$ca/ca.pem"
    chmod 0600 "$ca/ca-key.pem"
fi

# leaf DIR NAME CN SAN EKU: DIR/NAME.pem and DIR/NAME-key.pem, signed by the
# CA, and the CA's certificate as DIR/ca.pem and alone in DIR/trust (a
# directory for SSL_CERT_DIR, which adds every certificate it holds).
leaf() {
    dir=$out/$1 name=$2 cn=$3 san=$4 eku=$5
    mkdir -p "$dir/trust"
    cp "$ca/ca.pem" "$dir/ca.pem"
    cp "$ca/ca.pem" "$dir/trust/ca.pem"
    if [ -s "$dir/$name.pem" ] && openssl verify -CAfile "$ca/ca.pem" "$dir/$name.pem" >/dev/null 2>&1; then
        return 0
    fi
    openssl req -newkey rsa:2048 -nodes -sha256 -subj "/CN=$cn" \
        -keyout "$dir/$name-key.pem" -out "$dir/$name.csr"
    printf 'subjectAltName=%s\nextendedKeyUsage=%s\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n' \
        "$san" "$eku" >"$dir/$name.ext"
    openssl x509 -req -sha256 -days "$days" -in "$dir/$name.csr" -extfile "$dir/$name.ext" \
        -CA "$ca/ca.pem" -CAkey "$ca/ca-key.pem" -CAcreateserial -CAserial "$ca/ca.srl" -out "$dir/$name.pem"
    rm -f "$dir/$name.csr" "$dir/$name.ext"
    chmod 0644 "$dir/$name-key.pem"
    echo "gitfleet-pki: $1/$name.pem ($cn)"
}

# Temporal's server: its frontend and its own nodes (internode is mutual,
# so the same certificate is also a client's).
leaf temporal temporal temporal "DNS:temporal,DNS:localhost,IP:127.0.0.1" serverAuth,clientAuth
# The registries (push and read-only) answer as registry:5000.
leaf registry registry registry "DNS:registry,DNS:localhost,IP:127.0.0.1" serverAuth
# Temporal's clients, one identity per role.
leaf admin client gitfleet-admin "DNS:gitfleet-admin" clientAuth
leaf worker client gitfleet-worker "DNS:gitfleet-worker" clientAuth
leaf starter client gitfleet-starter "DNS:gitfleet-starter" clientAuth
leaf runner client gitfleet-runner "DNS:gitfleet-runner" clientAuth

# The registry's users: gitfleet-push (workers) on the registry that
# accepts pushes, gitfleet-pull (runners, the starter) on the read-only
# one. Passwords are made once and kept beside the CA.
for user in push pull; do
    [ -s "$ca/$user.password" ] || { openssl rand -hex 24 >"$ca/$user.password"; chmod 0600 "$ca/$user.password"; }
    htpasswd -Bbn "gitfleet-$user" "$(cat "$ca/$user.password")" >"$out/registry/htpasswd-$user"
done
# dockerconfig ROLE USER: the Docker keychain gitfleet reads
# ($DOCKER_CONFIG/config.json) with USER's credentials for registry:5000.
dockerconfig() {
    mkdir -p "$out/$1/docker"
    auth=$(printf '%s' "gitfleet-$2:$(cat "$ca/$2.password")" | openssl base64 -A)
    printf '{"auths":{"registry:5000":{"auth":"%s"}}}\n' "$auth" >"$out/$1/docker/config.json"
}
dockerconfig worker push
dockerconfig starter pull
dockerconfig runner pull
echo "gitfleet-pki: done"
