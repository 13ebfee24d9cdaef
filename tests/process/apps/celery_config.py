"""The Celery app's configuration, apart from otel_tokens: kombu's filesystem transport in
CELERY_FOLDER (no broker server), no result backend (the fake LLM keeps the truth). The test
sends tasks with it from a process that records nothing."""

import os

from celery import Celery


def make_app() -> Celery:
    folder = os.environ["CELERY_FOLDER"]
    app = Celery("celery_app", broker="filesystem://", set_as_current=False)
    app.conf.update(
        broker_transport_options={"data_folder_in": folder, "data_folder_out": folder,
                                  "control_folder": folder, "polling_interval": 0.1},
        task_ignore_result=True, worker_enable_remote_control=False, worker_prefetch_multiplier=1,
        broker_connection_retry_on_startup=True, worker_hijack_root_logger=False,
        worker_pool_start_method=os.environ.get("CELERY_START_METHOD", "fork"),
    )  # fmt: skip
    return app


def send(count: int) -> None:
    """``count`` chat tasks."""
    app = make_app()
    with app.connection_for_write() as connection:
        for _ in range(count):
            app.send_task("chat", connection=connection)
