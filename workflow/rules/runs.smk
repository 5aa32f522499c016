# One job per pair (its speculative runs and the target-only runs that bracket them) and
# one micro-benchmark job per target; an interrupted study reruns only unfinished jobs.
rule runs_job:
    input:
        config=study_config,
        prompts=f"{RESULTS}/{{study}}/prompts.jsonl",
        reference=f"{RESULTS}/{{study}}/reference.parquet",
        seal=f"{RESULTS}/{{study}}/reference.seal.json",
        predictions=f"{RESULTS}/{{study}}/predictions.json",
        prediction_seal=f"{RESULTS}/{{study}}/prediction_seal.json",
    output:
        job_out("runs", "runs.parquet"),
        job_out("runs", "rounds.parquet"),
    log:
        f"{RESULTS}/{{study}}/logs/runs/{{part}}.log",
    conda:
        ENV
    threads: 2
    resources:
        mem_mb=model_mem_mb,
        gres=model_gres,
        timed=1,
    shell:
        stage_cmd("runs", "--part {wildcards.part:q}")


rule runs:
    input:
        config=study_config,
        jobs=job_files("runs", "runs.parquet", "rounds.parquet"),
    output:
        f"{RESULTS}/{{study}}/runs.parquet",
        f"{RESULTS}/{{study}}/rounds.parquet",
    log:
        f"{RESULTS}/{{study}}/logs/runs.log",
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=2000,
    shell:
        stage_cmd("runs", "--gather")


rule micro_job:
    input:
        config=study_config,
        prompts=f"{RESULTS}/{{study}}/prompts.jsonl",
    output:
        job_out("micro", "micro.parquet"),
    log:
        f"{RESULTS}/{{study}}/logs/micro/{{part}}.log",
    conda:
        ENV
    threads: 2
    resources:
        mem_mb=model_mem_mb,
        gres=model_gres,
        timed=1,
    shell:
        stage_cmd("micro", "--part {wildcards.part:q}")


rule micro:
    input:
        config=study_config,
        jobs=job_files("micro", "micro.parquet"),
    output:
        f"{RESULTS}/{{study}}/micro.parquet",
    log:
        f"{RESULTS}/{{study}}/logs/micro.log",
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=2000,
    shell:
        stage_cmd("micro", "--gather")


rule advise:
    input:
        config=study_config,
        prompts=f"{RESULTS}/{{study}}/prompts.jsonl",
        predictions=f"{RESULTS}/{{study}}/predictions.json",
        prediction_seal=f"{RESULTS}/{{study}}/prediction_seal.json",
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
        mem_mb=model_mem_mb,
        gres=model_gres,
        timed=1,
    shell:
        stage_cmd("advise")
