-- The dispatcher holding a broadcast's lease: renewing and releasing the lease check it, so a
-- dispatcher whose lease ran out and was taken over can neither extend nor clear the new
-- holder's lease.
ALTER TABLE broadcasts ADD COLUMN dispatch_lease_token uuid;
