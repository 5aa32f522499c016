rule reference:
    input:
        f"{RESULTS}/{{study}}/provenance.json",
        f"{RESULTS}/{{study}}/prompts.jsonl",
    output:
        f"{RESULTS}/{{study}}/reference.parquet",
        f"{RESULTS}/{{study}}/reference.seal.json",
    log:
        f"{RESULTS}/{{study}}/logs/reference.log",
    threads: 2
    resources:
        mem_mb=8000,
    params:
        cmd=stage_cmd("reference"),
    shell:
        "{params.cmd}"
