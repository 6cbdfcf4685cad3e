# Shared by the recommender's calibration benchmarks (sourced): the partrain binary, the
# workload's steps and batch, and the directory the traces and predictions go to.
PARTRAIN=${PARTRAIN:-build/bin/partrain}
STEPS=${STEPS:-8}
GLOBAL=${GLOBAL:-8}
MICRO=${MICRO:-2}
KEEP=${KEEP:-}                  # a directory to keep the traces and predictions in
PREDICT_ONLY=${PREDICT_ONLY:-}  # with KEEP: predict again from the kept traces, no new runs
dir=${KEEP:-$(mktemp -d)}
[[ -n $KEEP ]] || trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir"
[[ -n $PREDICT_ONLY ]] || rm -f "$dir"/*.db "$dir"/*.db-wal "$dir"/*.db-shm
