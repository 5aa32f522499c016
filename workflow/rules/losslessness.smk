rule batch_invariance:
    input:
        config=study_config,
        prompts=f"{RESULTS}/{{study}}/prompts.jsonl",
        reference=f"{RESULTS}/{{study}}/reference.parquet",
        seal=f"{RESULTS}/{{study}}/reference.seal.json",
    output:
        f"{RESULTS}/{{study}}/batch_invariance.parquet",
    log:
        f"{RESULTS}/{{study}}/logs/batch_invariance.log",
    conda:
        ENV
    threads: 2
    resources:
        mem_mb=model_mem_mb,
        gres=model_gres,
    shell:
        stage_cmd("batch_invariance")


rule qualification_job:
    input:
        config=study_config,
        prompts=f"{RESULTS}/{{study}}/prompts.jsonl",
        reference=f"{RESULTS}/{{study}}/reference.parquet",
        seal=f"{RESULTS}/{{study}}/reference.seal.json",
        predictions=f"{RESULTS}/{{study}}/predictions.json",
        prediction_seal=f"{RESULTS}/{{study}}/prediction_seal.json",
    output:
        job_out("qualification", "qualification.parquet"),
    log:
        f"{RESULTS}/{{study}}/logs/qualification/{{part}}.log",
    conda:
        ENV
    threads: 2
    resources:
        mem_mb=model_mem_mb,
        gres=model_gres,
    shell:
        stage_cmd("qualification", "--part {wildcards.part:q}")


rule qualification:
    input:
        config=study_config,
        jobs=job_files("qualification", "qualification.parquet"),
    output:
        f"{RESULTS}/{{study}}/qualification.parquet",
    log:
        f"{RESULTS}/{{study}}/logs/qualification.log",
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=2000,
    shell:
        stage_cmd("qualification", "--gather")


# Endpoint P: the predictors are chosen on the discovery prompts and their ids for the
# reserved prompts sealed (predictions.json, sealed by prediction_seal.json) before any rule
# that runs a live path on a reserved prompt: those take the seal as an input.
rule predict:
    input:
        config=study_config,
        prompts=f"{RESULTS}/{{study}}/prompts.jsonl",
        reference=f"{RESULTS}/{{study}}/reference.parquet",
        seal=f"{RESULTS}/{{study}}/reference.seal.json",
    output:
        f"{RESULTS}/{{study}}/predictions.json",
        f"{RESULTS}/{{study}}/prediction_seal.json",
    log:
        f"{RESULTS}/{{study}}/logs/predict.log",
    conda:
        ENV
    threads: 2
    resources:
        mem_mb=model_mem_mb,
        gres=model_gres,
    shell:
        stage_cmd("predict")


rule predicted:
    input:
        config=study_config,
        predictions=f"{RESULTS}/{{study}}/predictions.json",
        prediction_seal=f"{RESULTS}/{{study}}/prediction_seal.json",
        qualification=f"{RESULTS}/{{study}}/qualification.parquet",
        runs=f"{RESULTS}/{{study}}/runs.parquet",
    output:
        f"{RESULTS}/{{study}}/prediction.json",
        f"{RESULTS}/{{study}}/prediction_live.parquet",
    log:
        f"{RESULTS}/{{study}}/logs/predicted.log",
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=2000,
    shell:
        stage_cmd("predicted")


rule pit:
    input:
        config=study_config,
        prompts=f"{RESULTS}/{{study}}/prompts.jsonl",
        reference=f"{RESULTS}/{{study}}/reference.parquet",
        seal=f"{RESULTS}/{{study}}/reference.seal.json",
        runs=f"{RESULTS}/{{study}}/runs.parquet",
        rounds=f"{RESULTS}/{{study}}/rounds.parquet",
        predictions=f"{RESULTS}/{{study}}/predictions.json",
        prediction_seal=f"{RESULTS}/{{study}}/prediction_seal.json",
    output:
        f"{RESULTS}/{{study}}/pit.parquet",
    log:
        f"{RESULTS}/{{study}}/logs/pit.log",
    conda:
        ENV
    threads: 2
    resources:
        mem_mb=model_mem_mb,
        gres=model_gres,
    shell:
        stage_cmd("pit")


rule margins:
    input:
        config=study_config,
        prompts=f"{RESULTS}/{{study}}/prompts.jsonl",
        reference=f"{RESULTS}/{{study}}/reference.parquet",
        seal=f"{RESULTS}/{{study}}/reference.seal.json",
        runs=f"{RESULTS}/{{study}}/runs.parquet",
        qualification=f"{RESULTS}/{{study}}/qualification.parquet",
        predictions=f"{RESULTS}/{{study}}/predictions.json",
        prediction_seal=f"{RESULTS}/{{study}}/prediction_seal.json",
    output:
        f"{RESULTS}/{{study}}/margins.parquet",
    log:
        f"{RESULTS}/{{study}}/logs/margins.log",
    conda:
        ENV
    threads: 2
    resources:
        mem_mb=model_mem_mb,
        gres=model_gres,
    shell:
        stage_cmd("margins")


rule level1:
    output:
        f"{RESULTS}/{{study}}/level1.json",
        f"{RESULTS}/{{study}}/level1.parquet",
    log:
        f"{RESULTS}/{{study}}/logs/level1.log",
    conda:
        ENV
    params:
        seed=study_seed,
    threads: 1
    resources:
        mem_mb=1000,
    shell:
        f"specproof stage level1 --seed {{params.seed}} --results {results_arg()} {TEE}"


rule level2:
    output:
        f"{RESULTS}/{{study}}/level2.json",
        f"{RESULTS}/{{study}}/level2.parquet",
    log:
        f"{RESULTS}/{{study}}/logs/level2.log",
    conda:
        ENV
    params:
        seed=study_seed,
    threads: 1
    resources:
        mem_mb=1000,
    shell:
        f"specproof stage level2 --seed {{params.seed}} --results {results_arg()} {TEE}"


rule calibration:
    input:
        config=study_config,
        pit=f"{RESULTS}/{{study}}/pit.parquet",
    output:
        f"{RESULTS}/{{study}}/calibration.parquet",
        f"{RESULTS}/{{study}}/calibration.json",
        f"{RESULTS}/{{study}}/calibration_power.parquet",
    log:
        f"{RESULTS}/{{study}}/logs/calibration.log",
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=2000,
    shell:
        stage_cmd("calibration")
