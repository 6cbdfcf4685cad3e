"""Stand-in for DeepSpeed's package (README.md beside it): initialize() builds the engine."""

from deepspeed.runtime.config import DeepSpeedConfig
from deepspeed.runtime.engine import DeepSpeedEngine


def initialize(model, optimizer, config):
    """config: {"zero_stage": 0-2, "fp16": bool, "gradient_accumulation_steps": N,
    "pipeline": bool, and the batch sizes DeepSpeedConfig checks}."""
    DeepSpeedConfig(config)
    if config.get("pipeline"):
        from deepspeed.runtime.pipe.engine import PipelineEngine
        engine = PipelineEngine(model, optimizer, config)
    else:
        engine = DeepSpeedEngine(model, optimizer, config)
    return engine, engine.optimizer
