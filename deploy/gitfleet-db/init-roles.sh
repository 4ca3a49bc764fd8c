#!/bin/sh
# gitfleet-db's first start (docker-entrypoint-initdb.d, a fresh volume
# only): the roles of roles.sql, with their passwords from the compose
# secrets, never from the environment or a command line (psql reads each
# file itself). On an existing volume, run it once by hand:
#   docker compose exec gitfleet-db /docker-entrypoint-initdb.d/10-gitfleet-roles.sh
set -eu
secrets=${GITFLEET_SECRETS_DIR:-/run/secrets}
psql="psql -v ON_ERROR_STOP=1 --no-psqlrc -q --username ${POSTGRES_USER:-postgres} --dbname ${POSTGRES_DB:-gitfleet}"
$psql -f "${GITFLEET_ROLES_SQL:-/etc/gitfleet/roles.sql}"
for role in gitfleet gitfleet_worker gitfleet_starter gitfleet_runner; do
    $psql -v role="$role" -v file="$secrets/${role}_db_password" <<'SQL'
\set pw `cat :file`
ALTER ROLE :"role" PASSWORD :'pw';
SQL
done
