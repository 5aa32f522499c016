rule runs:
    input:
        f"{RESULTS}/{{study}}/reference.seal.json",
        f"{RESULTS}/{{study}}/prompts.jsonl",
    output:
        f"{RESULTS}/{{study}}/runs.parquet",
        f"{RESULTS}/{{study}}/rounds.parquet",
    log:
        f"{RESULTS}/{{study}}/logs/runs.log",
    threads: 2
    resources:
        mem_mb=8000,
    params:
        cmd=stage_cmd("runs"),
    shell:
        "{params.cmd}"


rule micro:
    input:
        f"{RESULTS}/{{study}}/prompts.jsonl",
        f"{RESULTS}/{{study}}/runs.parquet",
    output:
        f"{RESULTS}/{{study}}/micro.parquet",
    log:
        f"{RESULTS}/{{study}}/logs/micro.log",
    threads: 2
    resources:
        mem_mb=8000,
    params:
        cmd=stage_cmd("micro"),
    shell:
        "{params.cmd}"
