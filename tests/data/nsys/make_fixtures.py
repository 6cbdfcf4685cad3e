"""Writes the Nsight Systems fixtures of tests/data/nsys as SQL scripts (docs/import.md).

    python3 make_fixtures.py        # rewrites the *.sql files beside this script

nsys cannot be installed here, so these follow NVIDIA's documented export schema (the "SQLite
Schema Reference", schema 3.16.1 of nsys 2024.6.2 and 3.28.1 of nsys 2026.4): the tables and
columns partrain reads, with the values a 2-rank NCCL job traced with
`nsys profile -t cuda,nvtx torchrun --nproc-per-node 2 train.py` and exported with
`nsys export --type sqlite --include-blobs=true` would hold. NCCL's payloads follow NCCL 2.25+'s
schemas (src/include/nvtx_payload_schemas.h); binaryData carries nsys's 32-byte header
(u32 domain, u32 0, u32 schema id, u32 0, u64 payload size, u64 total size) in the first
report and the bare payload in the second, the two forms the importer accepts.

one_report.sql    both ranks as processes 4242 and 4243 of one report (torchrun under nsys)
rank0.sql         rank 0 alone (pid 4242), session start T
rank1.sql         rank 1 alone (pid 4243), session start T - 2 s, its host's clock 500 us ahead
future.sql        rank0.sql with export schema version 4.0.0
The job: ncclCommInitRank (comm 0xC0FFEE, 2 ranks), then 3 steps (NVTX range "train_step",
push/pop in the default domain), each a gemm kernel on stream 7 and an ncclAllReduce of 4096
bytes (Sum) whose ncclDevKernel runs on stream 20, and a 1 MiB HtoD memcpy before the first step.
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
SESSION_START = 1790900000000000000
COMM = 0xC0FFEE
ENUM_SCHEMA = (1 << 24) + 24  # NCCL 2.29's reduction-op enum schema id
SCHEMA_ALLREDUCE = (1 << 24) + 5
SCHEMA_INIT = (1 << 24) + 0

CREATE = """
CREATE TABLE META_DATA_EXPORT(name TEXT NOT NULL, value TEXT);
CREATE TABLE TARGET_INFO_SESSION_START_TIME(utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);
CREATE TABLE PROCESSES(globalPid INTEGER, pid INTEGER, name TEXT);
CREATE TABLE StringIds(id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE ThreadNames(nameId INTEGER NOT NULL, priority INTEGER, globalTid INTEGER);
CREATE TABLE NVTX_EVENTS(start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER, int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText TEXT, binaryData TEXT);
CREATE TABLE NVTX_PAYLOAD_SCHEMAS(domainId INTEGER, schemaId INTEGER, name TEXT, type INTEGER, flags INTEGER, numEntries INTEGER, payloadSize INTEGER, alignTo INTEGER);
CREATE TABLE NVTX_PAYLOAD_SCHEMA_ENTRIES(domainId INTEGER NOT NULL, schemaId INTEGER NOT NULL, idx INTEGER NOT NULL, flags INTEGER, type INTEGER, name TEXT, description TEXT, arrayOrUnionDetail INTEGER, offset INTEGER);
CREATE TABLE NVTX_PAYLOAD_ENUMS(domainId INTEGER, schemaId INTEGER, name TEXT, numEntries INTEGER, size INTEGER);
CREATE TABLE NVTX_PAYLOAD_ENUM_ENTRIES(domainId INTEGER NOT NULL, schemaId INTEGER NOT NULL, idx INTEGER NOT NULL, name TEXT, value INTEGER, isFlag INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME(start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER, launchType INTEGER, cacheConfig INTEGER, registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL, staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL, localMemoryPerThread INTEGER NOT NULL, localMemoryTotal INTEGER NOT NULL, gridId INTEGER NOT NULL, sharedMemoryExecuted INTEGER, graphNodeId INTEGER, sharedMemoryLimitConfig INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY(start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, deprecatedSrcId INTEGER, srcKind INTEGER, dstKind INTEGER, srcDeviceId INTEGER, srcContextId INTEGER, dstDeviceId INTEGER, dstContextId INTEGER, migrationCause INTEGER, graphNodeId INTEGER, virtualAddress INTEGER);
"""

STRINGS = {1: "python", 2: "cudaLaunchKernel_v7000", 3: "ncclAllReduce", 4: "ncclCommInitRank",
           5: "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
           6: "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 7: "void gemm<float>(float*)", 8: "gemm",
           9: "cudaMemcpyAsync_v3020", 10: "pt_main_thread"}


def blob(payload, schema, with_header):
    if not with_header:
        return payload
    return struct.pack("<IIIIQQ", 1, 0, schema, 0, len(payload), 32 + len(payload)) + payload


def schemas():
    rows = [
        "INSERT INTO NVTX_PAYLOAD_SCHEMAS VALUES(1,%d,NULL,1,NULL,3,24,NULL);" % SCHEMA_ALLREDUCE,
        "INSERT INTO NVTX_PAYLOAD_SCHEMAS VALUES(1,%d,NULL,1,NULL,4,24,NULL);" % SCHEMA_INIT,
        "INSERT INTO NVTX_PAYLOAD_SCHEMA_ENTRIES VALUES"
        "(1,%d,0,0,18,'NCCL communicator ID',NULL,0,0),(1,%d,1,0,22,'Message size [bytes]',NULL,0,8),"
        "(1,%d,2,0,%d,'Reduction operation',NULL,0,16);"
        % (SCHEMA_ALLREDUCE, SCHEMA_ALLREDUCE, SCHEMA_ALLREDUCE, ENUM_SCHEMA),
        "INSERT INTO NVTX_PAYLOAD_SCHEMA_ENTRIES VALUES"
        "(1,%d,0,0,18,'NCCL communicator ID',NULL,0,NULL),(1,%d,1,0,5,'No. of ranks',NULL,0,8),"
        "(1,%d,2,0,5,'Rank',NULL,0,12),(1,%d,3,0,5,'CUDA device',NULL,0,16);"
        % (SCHEMA_INIT, SCHEMA_INIT, SCHEMA_INIT, SCHEMA_INIT),
        "INSERT INTO NVTX_PAYLOAD_ENUMS VALUES(1,%d,NULL,5,4);" % ENUM_SCHEMA,
        "INSERT INTO NVTX_PAYLOAD_ENUM_ENTRIES VALUES(1,%d,0,'Sum',0,0),(1,%d,1,'Product',1,0),"
        "(1,%d,2,'Max',2,0),(1,%d,3,'Min',3,0),(1,%d,4,'Avg',4,0);" % ((ENUM_SCHEMA,) * 5),
    ]
    return rows


def rank_rows(rank, pid, with_header, skew_ns):
    """The rows of one rank's process; times in ns on the true clock (the caller shifts them)."""
    gpid = pid << 24
    gtid = gpid | pid
    rows = ["INSERT INTO PROCESSES VALUES(%d,%d,'python');" % (gpid, pid),
            "INSERT INTO ThreadNames VALUES(10,0,%d);" % gtid,
            "INSERT INTO NVTX_EVENTS(start,end,eventType,text,globalTid,domainId) "
            "VALUES(%d,NULL,75,'NCCL',%d,1);" % (1000 + skew_ns, gtid)]
    init = struct.pack("<QiiiI", COMM, 2, rank, rank, 0)
    rows.append("INSERT INTO NVTX_EVENTS(start,end,eventType,textId,globalTid,domainId,binaryData) "
                "VALUES(%d,%d,59,4,%d,1,X'%s');"
                % (2000 + skew_ns, 9000 + skew_ns, gtid, blob(init, SCHEMA_INIT, with_header).hex()))
    # memcpy before the steps
    rows.append("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES(%d,%d,0,%d,100,9,0,NULL);"
                % (10000 + skew_ns, 11000 + skew_ns, gtid))
    rows.append("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY(start,end,deviceId,contextId,streamId,"
                "correlationId,globalPid,bytes,copyKind,srcKind,dstKind) "
                "VALUES(%d,%d,%d,1,7,100,%d,1048576,1,0,2);"
                % (12000 + skew_ns, 14000 + skew_ns, rank, gpid))
    for step in range(3):
        t = 100000 * (step + 1)
        corr = 200 + 10 * step
        rows.append("INSERT INTO NVTX_EVENTS(start,end,eventType,text,globalTid,domainId) "
                    "VALUES(%d,%d,59,'train_step',%d,0);" % (t + skew_ns, t + 90000 + skew_ns, gtid))
        # the gemm: launched at t+1 us, runs t+5..t+45 us
        rows.append("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES(%d,%d,0,%d,%d,2,0,NULL);"
                    % (t + 1000 + skew_ns, t + 3000 + skew_ns, gtid, corr))
        rows.append("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL(start,end,deviceId,contextId,streamId,"
                    "correlationId,globalPid,demangledName,shortName,registersPerThread,gridX,gridY,"
                    "gridZ,blockX,blockY,blockZ,staticSharedMemory,dynamicSharedMemory,"
                    "localMemoryPerThread,localMemoryTotal,gridId) "
                    "VALUES(%d,%d,%d,1,7,%d,%d,7,8,128,64,1,1,256,1,1,1024,0,0,0,%d);"
                    % (t + 5000 + skew_ns, t + 45000 + skew_ns, rank, corr, gpid, corr))
        # the all-reduce: NCCL's range t+10..t+20 us, its launch inside, the kernel t+30..t+60
        # us on the true clock (both ranks' kernels end together)
        payload = struct.pack("<QQiI", COMM, 4096, 0, 0)
        rows.append("INSERT INTO NVTX_EVENTS(start,end,eventType,textId,globalTid,domainId,"
                    "binaryData) VALUES(%d,%d,59,3,%d,1,X'%s');"
                    % (t + 10000 + skew_ns, t + 20000 + skew_ns, gtid,
                       blob(payload, SCHEMA_ALLREDUCE, with_header).hex()))
        rows.append("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES(%d,%d,0,%d,%d,2,0,NULL);"
                    % (t + 12000 + skew_ns, t + 14000 + skew_ns, gtid, corr + 1))
        rows.append("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL(start,end,deviceId,contextId,streamId,"
                    "correlationId,globalPid,demangledName,shortName,registersPerThread,gridX,gridY,"
                    "gridZ,blockX,blockY,blockZ,staticSharedMemory,dynamicSharedMemory,"
                    "localMemoryPerThread,localMemoryTotal,gridId) "
                    "VALUES(%d,%d,%d,1,20,%d,%d,5,6,96,2,1,1,512,1,1,0,0,0,0,%d);"
                    % (t + 30000 + skew_ns, t + 60000 + skew_ns, rank, corr + 1, gpid, corr + 1))
    return rows


def report(version, session_start, ranks):
    rows = [CREATE.strip(),
            "INSERT INTO META_DATA_EXPORT VALUES('EXPORT_SCHEMA_VERSION','%s'),"
            "('EXPORT_PRODUCT_VERSION','2024.6.2.225');" % version,
            "INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES(%d,'2026-10-02T00:13:20Z',"
            "'2026-10-02T00:13:20');" % session_start]
    rows += ["INSERT INTO StringIds VALUES(%d,'%s');" % kv for kv in sorted(STRINGS.items())]
    rows += schemas()
    for rank_rows_ in ranks:
        rows += rank_rows_
    return "\n".join(rows) + "\n"


def write(name, text):
    with open(os.path.join(HERE, name), "w") as f:
        f.write("-- Made by make_fixtures.py (see its docstring); build with sqlite3 or the tests.\n")
        f.write(text)


def main():
    write("one_report.sql", report("3.16.1", SESSION_START,
                                   [rank_rows(0, 4242, True, 0), rank_rows(1, 4243, True, 0)]))
    write("rank0.sql", report("3.28.1", SESSION_START, [rank_rows(0, 4242, True, 0)]))
    # A session started two seconds earlier: rows are 2 s later on its session clock, and its
    # host's clock reads 500 us ahead of rank 0's.
    write("rank1.sql", report("3.28.1", SESSION_START - 2_000_000_000,
                              [rank_rows(1, 4243, False, 2_000_000_000 + 500_000)]))
    write("future.sql", report("4.0.0", SESSION_START, [rank_rows(0, 4242, True, 0)]))


if __name__ == "__main__":
    main()
