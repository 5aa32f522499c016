rule runs:
    input:
        f"{RESULTS}/{{study}}/reference.seal.json",
        f"{RESULTS}/{{study}}/prompts.jsonl",
    output:
        f"{RESULTS}/{{study}}/runs.parquet",
        f"{RESULTS}/{{study}}/rounds.parquet",
    log:
        f"{RESULTS}/{{study}}/logs/runs.log",
    conda:
        ENV
    threads: 2
    resources:
        mem_mb=8000,
    shell:
        stage_cmd("runs")


rule micro:
    input:
        f"{RESULTS}/{{study}}/prompts.jsonl",
        f"{RESULTS}/{{study}}/runs.parquet",
    output:
        f"{RESULTS}/{{study}}/micro.parquet",
    log:
        f"{RESULTS}/{{study}}/logs/micro.log",
    conda:
        ENV
    threads: 2
    resources:
        mem_mb=8000,
    shell:
        stage_cmd("micro")


rule advise:
    input:
        f"{RESULTS}/{{study}}/prompts.jsonl",
        f"{RESULTS}/{{study}}/micro.parquet",
    output:
        f"{RESULTS}/{{study}}/advise.parquet",
        f"{RESULTS}/{{study}}/advise_micro.parquet",
        f"{RESULTS}/{{study}}/advise_rounds.parquet",
        f"{RESULTS}/{{study}}/advise_runs.parquet",
    log:
        f"{RESULTS}/{{study}}/logs/advise.log",
    conda:
        ENV
    threads: 2
    resources:
        mem_mb=8000,
    shell:
        stage_cmd("advise")
