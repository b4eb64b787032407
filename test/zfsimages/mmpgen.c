/*
 * mmpgen: make multihost (MMP) OpenZFS pools on plain files with the userspace libzpool,
 * no kernel module. Used by make-images.sh to produce the fixtures under
 * storage/zfs/testdata/ and by the live MMP test as "the other host".
 *
 * usage: mmpgen [-m] [-M] [-a ASHIFT] [-i INTERVAL_MS] [-n HOSTNAME] [-s SECONDS]
 *               [-t SYNC_MS] [-c CACHEFILE] -x export|hold|import|importhold POOL FILE...
 *   -m            multihost=on (needs a hostid: set ZFS_HOSTID=0x...)
 *   -M            the files form one mirror (default: one file, or a stripe)
 *   -a ASHIFT     ashift of the top-level vdev(s) (default 9)
 *   -i MS         zfs_multihost_interval in ms (default 1000)
 *   -n HOSTNAME   host name written to the labels (default: uname)
 *   -s SECONDS    seconds to keep the pool imported before exporting (export mode)
 *   -t MS         while holding: log a history record and sync a txg every MS (default 0:
 *                 no forced syncs), so txg syncs and MMP writes interleave as on a busy pool
 *   -x export     create, run -s seconds, export cleanly, exit 0
 *   -x hold       create, print "ready" on stdout, keep the pool imported (MMP writes every
 *                 interval) until killed; kill -9 leaves the pool active on disk
 *   -x import     import the existing pool POOL found in directory FILE (the first file
 *                 argument names the directory to search) with OpenZFS's own activity
 *                 check, then export it again. Exit 0 imported, 3 refused because another
 *                 host is active (EREMOTEIO), 1 any other error.
 *   -x importhold import as -x import does (exit 3 when refused), then print "ready" and
 *                 hold the pool imported as -x hold does (MMP writes, -t syncs)
 * Files must exist with their final size (at least 64 MiB).
 * The generator is test tooling: it prints a message and exits 1 on any error.
 */
#include <sys/zfs_context.h>
#include <sys/spa.h>
#include <sys/spa_impl.h>
#include <sys/mmp.h>
#include <sys/fs/zfs.h>
#include <sys/nvpair.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <getopt.h>
#include <libzutil.h>

extern char *spa_config_path;

static nvlist_t *
file_vdev(const char *path, uint64_t ashift)
{
	nvlist_t *nv = fnvlist_alloc();
	char abspath[MAXPATHLEN];

	if (realpath(path, abspath) == NULL) {
		perror(path);
		exit(1);
	}
	fnvlist_add_string(nv, ZPOOL_CONFIG_TYPE, VDEV_TYPE_FILE);
	fnvlist_add_string(nv, ZPOOL_CONFIG_PATH, abspath);
	fnvlist_add_uint64(nv, ZPOOL_CONFIG_IS_LOG, 0);
	fnvlist_add_uint64(nv, ZPOOL_CONFIG_ASHIFT, ashift);
	return (nv);
}

/*
 * Keep pool imported until killed: MMP writes every interval (the MMP thread), and with
 * sync_ms a history record and a txg sync every sync_ms.
 */
static void
hold_pool(const char *pool, uint64_t sync_ms)
{
	spa_t *spa;
	int err;

	printf("ready\n");
	fflush(stdout);
	if (sync_ms == 0) {
		for (;;)
			sleep(3600);
	}
	if ((err = spa_open(pool, &spa, FTAG)) != 0) {
		fprintf(stderr, "mmpgen: spa_open: %s\n", strerror(err));
		exit(1);
	}
	for (uint64_t i = 0; ; i++) {
		usleep(sync_ms * 1000);
		spa_history_log_internal(spa, "mmpgen", NULL, "tick %llu",
		    (unsigned long long)i);
		txg_wait_synced(spa_get_dsl(spa), 0);
	}
}

/*
 * Import pool from the files in dir the way zdb -e does (zpool_find_config with the
 * libzpool ops), which runs OpenZFS's activity check; export it again on success.
 */
static int
import_pool(const char *pool, const char *dir, int hold, uint64_t sync_ms)
{
	importargs_t args = { 0 };
	char *paths[1] = { (char *)dir };
	nvlist_t *cfg = NULL;
	int err;

	args.paths = 1;
	args.path = paths;
	args.can_be_active = B_TRUE;
	err = zpool_find_config(NULL, pool, &cfg, &args, &libzpool_config_ops);
	if (err != 0) {
		fprintf(stderr, "mmpgen: pool %s not found in %s: %s\n", pool,
		    dir, strerror(err));
		return (1);
	}
	err = spa_import(pool, cfg, NULL, ZFS_IMPORT_NORMAL);
	if (err == EREMOTEIO) {
		fprintf(stderr, "mmpgen: import %s refused: %s (activity check)\n",
		    pool, strerror(err));
		printf("active\n");
		return (3);
	}
	if (err != 0) {
		fprintf(stderr, "mmpgen: import %s: %s\n", pool, strerror(err));
		return (1);
	}
	printf("imported\n");
	fflush(stdout);
	if (hold)
		hold_pool(pool, sync_ms);
	if ((err = spa_export((char *)pool, NULL, B_FALSE, B_FALSE)) != 0) {
		fprintf(stderr, "mmpgen: export %s: %s\n", pool, strerror(err));
		return (1);
	}
	kernel_fini();
	return (0);
}

int
main(int argc, char **argv)
{
	int multihost = 0, mirror = 0, c, err;
	uint64_t ashift = 9, interval = 1000, seconds = 3, sync_ms = 0;
	const char *hostname = NULL, *mode = NULL, *cache = "/tmp/mmpgen.cache";

	while ((c = getopt(argc, argv, "mMa:i:n:s:t:x:c:")) != -1) {
		switch (c) {
		case 'm': multihost = 1; break;
		case 'M': mirror = 1; break;
		case 'a': ashift = strtoull(optarg, NULL, 0); break;
		case 'i': interval = strtoull(optarg, NULL, 0); break;
		case 'n': hostname = optarg; break;
		case 's': seconds = strtoull(optarg, NULL, 0); break;
		case 't': sync_ms = strtoull(optarg, NULL, 0); break;
		case 'x': mode = optarg; break;
		case 'c': cache = optarg; break;
		default:
			fprintf(stderr, "mmpgen: bad option\n");
			return (1);
		}
	}
	if (mode == NULL || argc - optind < 2 ||
	    (strcmp(mode, "export") != 0 && strcmp(mode, "hold") != 0 &&
	    strcmp(mode, "import") != 0 && strcmp(mode, "importhold") != 0)) {
		fprintf(stderr, "usage: mmpgen [-m] [-M] [-a ASHIFT] [-i MS] "
		    "[-n HOST] [-s SEC] [-t MS] -x export|hold|import|importhold "
		    "POOL FILE...\n");
		return (1);
	}
	const char *pool = argv[optind];
	int nfiles = argc - optind - 1;
	char **files = &argv[optind + 1];

	zfs_multihost_interval = interval;
	spa_config_path = (char *)cache;
	kernel_init(SPA_MODE_READ | SPA_MODE_WRITE);
	if (hostname != NULL) {
		strlcpy(utsname()->nodename, hostname,
		    sizeof (utsname()->nodename));
	}

	if (strcmp(mode, "import") == 0 || strcmp(mode, "importhold") == 0)
		return (import_pool(pool, files[0],
		    strcmp(mode, "importhold") == 0, sync_ms));

	nvlist_t **leaves = calloc(nfiles, sizeof (nvlist_t *));
	for (int i = 0; i < nfiles; i++)
		leaves[i] = file_vdev(files[i], ashift);

	nvlist_t *root = fnvlist_alloc();
	fnvlist_add_string(root, ZPOOL_CONFIG_TYPE, VDEV_TYPE_ROOT);
	if (mirror) {
		nvlist_t *m = fnvlist_alloc();
		fnvlist_add_string(m, ZPOOL_CONFIG_TYPE, VDEV_TYPE_MIRROR);
		fnvlist_add_uint64(m, ZPOOL_CONFIG_IS_LOG, 0);
		fnvlist_add_uint64(m, ZPOOL_CONFIG_ASHIFT, ashift);
		fnvlist_add_nvlist_array(m, ZPOOL_CONFIG_CHILDREN,
		    leaves, nfiles);
		fnvlist_add_nvlist_array(root, ZPOOL_CONFIG_CHILDREN,
		    &m, 1);
	} else {
		fnvlist_add_nvlist_array(root, ZPOOL_CONFIG_CHILDREN,
		    leaves, nfiles);
	}

	nvlist_t *props = fnvlist_alloc();
	fnvlist_add_uint64(props, zpool_prop_to_name(ZPOOL_PROP_MULTIHOST),
	    multihost);
	fnvlist_add_string(props, zpool_prop_to_name(ZPOOL_PROP_CACHEFILE),
	    "none");

	err = spa_create(pool, root, props, NULL, NULL);
	if (err != 0) {
		fprintf(stderr, "mmpgen: spa_create %s: error %d (%s)\n", pool,
		    err, strerror(err));
		return (1);
	}

	spa_t *spa;
	if ((err = spa_open(pool, &spa, FTAG)) != 0) {
		fprintf(stderr, "mmpgen: spa_open: %s\n", strerror(err));
		return (1);
	}
	txg_wait_synced(spa_get_dsl(spa), 0);
	fprintf(stderr, "mmpgen: pool %s created, hostid %#x, multihost %d, "
	    "interval %llu ms\n", pool, spa_get_hostid(spa), multihost,
	    (unsigned long long)interval);
	spa_close(spa, FTAG);

	if (strcmp(mode, "hold") == 0)
		hold_pool(pool, sync_ms);

	sleep(seconds);
	nvlist_t *oldconfig = NULL;
	if ((err = spa_export((char *)pool, &oldconfig, B_FALSE, B_FALSE)) != 0) {
		fprintf(stderr, "mmpgen: spa_export: %s\n", strerror(err));
		return (1);
	}
	fprintf(stderr, "mmpgen: pool %s exported\n", pool);
	kernel_fini();
	return (0);
}
