source bench/gpu_deps.sh; export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH; O=$OUT
timeout 75 bench/gpu.sh build-gpu build > $O/build.txt 2>&1; tail -1 $O/build.txt
timeout 60 ctest --test-dir build-gpu -R '^(test_cuda|test_cuda_attention|test_gpt2|test_backend_lists|test_lm_head)$' --timeout 50 -V > $O/tests.log 2>&1; grep -E "tests passed|tests failed|\*\*\*Failed|bf16 GPT-2|bf16 head" $O/tests.log | tail -8
B="build-gpu/bench/bench_gpt2 --batch 8 --seq 1024 --steps 6 --device cuda --tf32 --threads 16 --json"
for r in 1 2 3; do for p in "bf16 none" "bf16 least"; do set -- $p; timeout 30 $B --precision $1 --schedule $2 2>/dev/null | sed "s/^{/{\"round\":$r,/" >> $O/gpt2_bf16_recheck.jsonl; done; done
cut -c1-330 $O/gpt2_bf16_recheck.jsonl
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu); timeout 50 $ncu --metrics gpu__time_duration.sum --csv -c 1100 $B --precision bf16 --steps 2 > $O/ncu.csv 2>&1; python3 bench/ncu_table.py $O/ncu.csv --top 25 --title "GPT-2 small B=8 T=1024 bf16 none, first 1100 kernels of two steps under ncu" > $O/ncu_kernels_bf16.txt 2>&1; head -20 $O/ncu_kernels_bf16.txt | cut -c1-150
