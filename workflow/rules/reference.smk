# One job per target writes its rows; the gather joins them in target order and seals them.
rule reference_job:
    input:
        config=study_config,
        prompts=f"{RESULTS}/{{study}}/prompts.jsonl",
    output:
        job_out("reference", "reference.parquet"),
    log:
        f"{RESULTS}/{{study}}/logs/reference/{{part}}.log",
    conda:
        ENV
    threads: 2
    resources:
        mem_mb=model_mem_mb,
        gres=model_gres,
    shell:
        stage_cmd("reference", "--part {wildcards.part:q}")


rule reference:
    input:
        config=study_config,
        provenance=f"{RESULTS}/{{study}}/provenance.json",
        jobs=job_files("reference", "reference.parquet"),
    output:
        f"{RESULTS}/{{study}}/reference.parquet",
        f"{RESULTS}/{{study}}/reference.seal.json",
    log:
        f"{RESULTS}/{{study}}/logs/reference.log",
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=2000,
    shell:
        stage_cmd("reference", "--gather")
