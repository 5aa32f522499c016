rule reference:
    input:
        f"{RESULTS}/{{study}}/provenance.json",
        f"{RESULTS}/{{study}}/prompts.jsonl",
    output:
        f"{RESULTS}/{{study}}/reference.parquet",
        f"{RESULTS}/{{study}}/reference.seal.json",
    log:
        f"{RESULTS}/{{study}}/logs/reference.log",
    conda:
        ENV
    threads: 2
    resources:
        mem_mb=8000,
    shell:
        stage_cmd("reference")
