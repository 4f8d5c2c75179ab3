/* client/vetnet.h - pilot vet --net / --nccl: the cross-node checks of
 * pilot-vetcheck as a task of the pilot (client/vetnet.c) */
#ifndef PL_CLIENT_VETNET_H
#define PL_CLIENT_VETNET_H

#include <stdbool.h>

#include "client/cli.h"
#include "client/conn.h"

/* Run `pilot-vetcheck net` (one rank on each node that is up and not
 * cordoned) or with 'nccl' `pilot-vetcheck nccl` (one rank a GPU) as a
 * task over 'conn', with the limits of vet.yaml 'file' (NULL: the
 * pilot's, DIR/vet.yaml, else the built-in default); print its report
 * and cordon the nodes it names.  The exit status: 0 passed or nothing
 * to check, 3 a check failed, else PL_EXIT_ERROR. */
int pl_vet_net_cmd(struct pl_cli *cli, struct pl_conn *conn, bool nccl,
                   const char *file);

/* `pilot up --wait`: when vet.yaml text 'yaml' (NULL: the built-in
 * default) asks for them (net.at_start, nccl.at_start), wait until the
 * nodes' own vetting is done and run the checks, their words on
 * stderr.  PL_EXIT_OK (nodes that failed are cordoned), or an error's
 * exit status. */
int pl_vet_net_at_start(struct pl_cli *cli, const struct pl_pilot *p,
                        const char *yaml);

#endif /* !PL_CLIENT_VETNET_H */
