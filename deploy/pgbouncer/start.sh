#!/bin/sh
# gitfleet-pgbouncer's entrypoint: the auth file from the roles' compose
# secrets, written in memory (/tmp is a tmpfs), then PgBouncer. A password
# is quoted as the auth file wants it: in double quotes, a double quote
# doubled.
set -eu
umask 077
mkdir -p /tmp/pgbouncer
: >/tmp/pgbouncer/userlist.txt
for role in gitfleet_worker gitfleet_starter gitfleet_runner; do
	pw="$(cat "/run/secrets/${role}_db_password")"
	printf '"%s" "%s"\n' "$role" "$(printf '%s' "$pw" | sed 's/"/""/g')" >>/tmp/pgbouncer/userlist.txt
done
exec pgbouncer /etc/gitfleet/pgbouncer.ini
