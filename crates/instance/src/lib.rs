//! The instance manager (PID 1 of every PostgreSQL pod).
