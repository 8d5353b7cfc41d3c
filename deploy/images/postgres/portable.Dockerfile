# A PostgreSQL instance image for a major that Debian 12's archive does not
# carry (16, 17, 18): a relocatable build of PostgreSQL (bin, lib, share)
# put in Debian's layout, /usr/lib/postgresql/<major>, with Debian's
# pgBackRest (Debian 13's program over Debian 12's package:
# install-pgbackrest says why), run as the non-root user 999 the operator expects. The same
# shape as the image of deploy/images/postgres/Dockerfile, so pods, the
# major upgrade's copy of the old installation and the tests treat both
# alike.
#
# scripts/build-images makes the build context from the installation
# `scripts/setup` unpacks under /opt/tusk/postgresql/<major>:
#   pginstall/  the installation (bin, lib, share)
#   libs/       libraries its programs load from beside the installation
#               (a wheel's `<name>.libs`); may be empty
#   install-pgbackrest  (deploy/images/postgres/install-pgbackrest)
#
#   scripts/build-images --majors "16 17 18"
ARG BASE_IMAGE=tusk.local/debian:bookworm

# The installation's programs find their libraries relative to where the
# wheel put them; here every ELF file is made to find them in the
# installation's own lib directory, wherever the installation is copied
# (the upgrade pod copies the old major elsewhere).
FROM ${BASE_IMAGE} AS relocate
LABEL dev.tusk.stage=postgres-relocate
RUN set -eux; \
    export DEBIAN_FRONTEND=noninteractive; \
    apt-get update; \
    apt-get install -y --no-install-recommends patchelf; \
    rm -rf /var/lib/apt/lists/*
COPY pginstall /pg
COPY libs /pg/lib/
RUN set -eux; \
    rm -rf /pg/include /pg/lib/*.a /pg/lib/pkgconfig; \
    find /pg -type f | while read -r file; do \
        patchelf --print-rpath "$file" >/dev/null 2>&1 || continue; \
        rpath="\$ORIGIN/$(realpath --relative-to="$(dirname "$file")" /pg/lib)"; \
        patchelf --force-rpath --set-rpath "$rpath" "$file"; \
        echo "$file" >> /elf-files; \
    done; \
    /pg/bin/postgres --version; \
    xargs ldd < /elf-files | (! grep "not found")

FROM ${BASE_IMAGE}

# Created before the packages so that they adopt these ids rather than pick
# the next free system id (what the pod's securityContext names must exist).
RUN groupadd --system --gid 999 postgres \
 && useradd --system --uid 999 --gid 999 --home-dir /var/lib/postgresql \
        --no-create-home --shell /bin/bash postgres

# pgBackRest and its postgresql-common, with no packaged "main" cluster
# (the instance manager runs initdb itself). Before PG_MAJOR: one layer for
# every major.
COPY install-pgbackrest /usr/local/sbin/install-pgbackrest
RUN set -eux; \
    export DEBIAN_FRONTEND=noninteractive; \
    apt-get update; \
    apt-get install -y --no-install-recommends postgresql-common; \
    sed -ri 's/^#? *create_main_cluster *=.*/create_main_cluster = false/' \
        /etc/postgresql-common/createcluster.conf; \
    apt-get install -y --no-install-recommends pgbackrest libssh2-1 ca-certificates; \
    install-pgbackrest; \
    apt-get clean; \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb

ARG PG_MAJOR
COPY --from=relocate /pg /usr/lib/postgresql/${PG_MAJOR}
# Debian's layout has the shared files under /usr/share/postgresql/<major>;
# a relative link keeps them where the relocatable programs look (the
# share directory pg_config names, beside bin), also in a copy of both
# directories.
RUN set -eux; \
    test -n "${PG_MAJOR}"; \
    mkdir -p /usr/share/postgresql; \
    share="$("/usr/lib/postgresql/${PG_MAJOR}/bin/pg_config" --sharedir)"; \
    ln -s "$(realpath --relative-to=/usr/share/postgresql "$share")" "/usr/share/postgresql/${PG_MAJOR}"; \
    "/usr/lib/postgresql/${PG_MAJOR}/bin/postgres" --version | grep -q " ${PG_MAJOR}\."; \
    test -f "/usr/share/postgresql/${PG_MAJOR}/postgres.bki"; \
    install -d -o postgres -g postgres -m 0755 /var/lib/postgresql /var/lib/postgresql/data; \
    install -d -o postgres -g postgres -m 2775 /var/run/postgresql

ENV PG_MAJOR=${PG_MAJOR} \
    PATH=/usr/lib/postgresql/${PG_MAJOR}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8
USER 999:999
WORKDIR /var/lib/postgresql
STOPSIGNAL SIGINT
CMD ["postgres", "--version"]
