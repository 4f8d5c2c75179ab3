/* proto/state.c - task states and their names */
#include <string.h>

#include "proto/state.h"

static const char *names[PL_ST_COUNT] = {
    [PL_ST_WAITING] = "waiting", [PL_ST_QUEUED] = "queued",
    [PL_ST_ASSIGNED] = "assigned", [PL_ST_RUNNING] = "running",
    [PL_ST_DONE] = "done", [PL_ST_FAILED] = "failed",
    [PL_ST_CANCELED] = "canceled", [PL_ST_TIMEOUT] = "timeout",
};

const char *pl_state_name(int st)
{
    if (st <= 0 || st >= PL_ST_COUNT)
        return NULL;
    return names[st];
}

int pl_state_parse(const char *s)
{
    for (int i = 1; i < PL_ST_COUNT; i++)
        if (!strcmp(s, names[i]))
            return i;
    return -1;
}

bool pl_state_final(int st)
{
    return st == PL_ST_DONE || st == PL_ST_FAILED || st == PL_ST_CANCELED
           || st == PL_ST_TIMEOUT;
}
